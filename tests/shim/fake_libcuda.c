/* fake_libcuda.c - built as a library named libcuda.so.1 for prog_nocuda:
 * the shim only asks whether a library of that name is loaded. */
int fake_libcuda_marker(void);
int fake_libcuda_marker(void) { return 0; }
