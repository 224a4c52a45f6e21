/* pch.cc -- the translation unit of the test code's precompiled header
 * (tests/CMakeLists.txt: rmutex_test_pch).  It has no code of its own. */
