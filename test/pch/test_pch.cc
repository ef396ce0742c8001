// The translation unit that builds test/pch/test_pch.h's precompiled header (see
// test/CMakeLists.txt); it has no code of its own.
