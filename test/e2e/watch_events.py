"""The events of a saved `kubectl get --watch -o json` stream, for the e2e scripts' checks.

kubectl writes one JSON object per event, back to back (pretty-printed, not one per line). A
watch killed mid-write leaves a truncated last object, which ends the stream.
Use: PYTHONPATH="$ROOT/test/e2e" python3 - FILE <<'PYEOF' ... from watch_events import events
"""
import json


def events(path):
    """Yields each event object of the stream in `path`, in order."""
    text, dec, pos = open(path).read(), json.JSONDecoder(), 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        try:
            ev, pos = dec.raw_decode(text, pos)
        except ValueError:
            return
        yield ev
