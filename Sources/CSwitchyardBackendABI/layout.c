// The layout rules of switchyard_backend.h that a host relies on before it trusts a
// table, checked when the target compiles.
#include "switchyard_backend.h"

// A host reads the version, then the size, at fixed offsets, whatever the version.
_Static_assert(offsetof(sy_backend, abi_version) == 0, "abi_version must be the table's first field");
_Static_assert(offsetof(sy_backend, size) == 4, "size must follow abi_version");
_Static_assert(sizeof(((sy_backend *)0)->abi_version) == 4, "abi_version is a uint32_t");
// Every struct that may grow starts with its size.
_Static_assert(offsetof(sy_error, size) == 0, "sy_error starts with its size");
_Static_assert(offsetof(sy_endpoint, size) == 0, "sy_endpoint starts with its size");
_Static_assert(offsetof(sy_configuration, size) == 0, "sy_configuration starts with its size");
_Static_assert(offsetof(sy_connect_options, size) == 0, "sy_connect_options starts with its size");
_Static_assert(offsetof(sy_listen_options, size) == 0, "sy_listen_options starts with its size");
_Static_assert(offsetof(sy_handler_callbacks, size) == 0, "sy_handler_callbacks starts with its size");
_Static_assert(offsetof(sy_accept_callbacks, size) == 0, "sy_accept_callbacks starts with its size");
