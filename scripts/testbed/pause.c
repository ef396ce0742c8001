/* Minimal pod-sandbox "pause" process for the kruise-cpp test bed.
 *
 * It runs as PID 1 of the sandbox's PID namespace, where the kernel drops every signal that has no
 * handler, so it installs handlers for SIGTERM/SIGINT (exit 0) and reaps adopted children on SIGCHLD.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_terminate(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("kruise-testbed-pause 1");
    return 0;
  }
  struct sigaction term;
  memset(&term, 0, sizeof(term));
  term.sa_handler = on_terminate;
  sigemptyset(&term.sa_mask);
  struct sigaction child;
  memset(&child, 0, sizeof(child));
  child.sa_handler = on_child;
  child.sa_flags = SA_NOCLDSTOP;
  sigemptyset(&child.sa_mask);
  if (sigaction(SIGTERM, &term, NULL) != 0 || sigaction(SIGINT, &term, NULL) != 0 ||
      sigaction(SIGCHLD, &child, NULL) != 0) {
    perror("sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
