// libuv for Swift: the system header, plus prefixed static-inline wrappers for what
// Swift cannot call directly (macros, variadic functions).
#ifndef CLIBUV_SHIM_H
#define CLIBUV_SHIM_H

#include <uv.h>

#endif
