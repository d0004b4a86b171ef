// switchyard_backend.h: the C interface between a Switchyard host and a backend library
// loaded at run time.
//
// A backend library exports ONE symbol, `switchyard_backend_entry`, that returns a pointer
// to a `sy_backend` table. The host reads the table's first field, `abi_version`, before
// anything else and refuses a library whose version is not its own; then `size`, which
// must cover every field of the version; then the rest. Only plain C crosses: the table's
// function pointers, plain structs, opaque handles and callbacks as (context, function).
// No Swift type crosses, because the library holds its own copy of the Swift modules
// (a SwiftPM `.dynamic` product embeds its whole dependency graph) and a Swift value
// of one copy is not a value of the other.
//
// Toolkit users never write against this header: `LoadableBackend.export(_:)` in
// SwitchyardBackendKit fills the table from a `TransportBackend`, and
// `LoadableBackend.load(path:)` turns a loaded table back into one. The header is the
// contract for both sides, and for a library written in another language.
//
// ## Rules
//
// - Versions. A change to a field's meaning, type or place, or removing a field, raises
//   SY_BACKEND_ABI_VERSION. Fields may be ADDED at the end of a struct that carries a
//   `size` without raising it: a reader reads a field only when `size` covers it, and a
//   writer sets `size` to `sizeof` of the struct as it was built.
// - Handles (`sy_transport`, `sy_connection`, `sy_listener`, `sy_operation`, `sy_loop`)
//   are opaque. A handle given to the host (by a `done` callback, `accepted`, or a
//   return value marked "owned") is the host's to release once with its `*_release`.
//   `connection_event_loop` returns a borrowed loop handle: valid while the connection
//   handle is; `loop_retain` keeps it longer. A handle may be used from any thread.
// - Strings are UTF-8, NUL-terminated, and borrowed for the duration of the call (or of
//   the callback) that passes them; the receiver copies what it keeps. The table's own
//   strings live as long as the process.
// - Callbacks. Each function that takes a `done` callback calls it exactly once, with
//   the `context` it was given, on any thread, possibly before the function returns
//   (`transport_make` always does; a connect to a malformed endpoint may). A
//   `const sy_error *` is NULL on success. A write's `done` may be NULL: no completion. Callback tables (`sy_handler_callbacks`, `sy_accept_callbacks`)
//   are copied by the library when it receives them; their `release(context)` runs
//   exactly once, when the library will call none of them again.
// - Threads. Connection handler callbacks, accepted connections and write completions
//   run on the library's event loop threads, the loop `connection_event_loop` names, one
//   at a time per connection, as the Switchyard `Connection` contract says.
// - The library is never unloaded (Swift images cannot be).
//
// Host and library must be built by the same Swift toolchain, and the library must not
// be linked with `--static-swift-stdlib`: both share the process's one Swift runtime.

#ifndef SWITCHYARD_BACKEND_H
#define SWITCHYARD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The interface version this header describes.
#define SY_BACKEND_ABI_VERSION 1u

/// The name of the one symbol a backend library exports.
#define SY_BACKEND_ENTRY_SYMBOL "switchyard_backend_entry"

typedef struct sy_transport sy_transport;
typedef struct sy_connection sy_connection;
typedef struct sy_listener sy_listener;
typedef struct sy_loop sy_loop;
/// A pending connect or listen, so the host can cancel it with its task.
typedef struct sy_operation sy_operation;

/// A Swift `Duration`, exactly: whole seconds and attoseconds (10^-18 s).
typedef struct sy_duration {
    int64_t seconds;
    int64_t attoseconds;
} sy_duration;

/// `TransportError.Code` as gRPC's status numbers (0, OK, is never an error).
enum {
    SY_CODE_CANCELLED = 1,
    SY_CODE_UNKNOWN = 2,
    SY_CODE_INVALID_ARGUMENT = 3,
    SY_CODE_DEADLINE_EXCEEDED = 4,
    SY_CODE_NOT_FOUND = 5,
    SY_CODE_PERMISSION_DENIED = 7,
    SY_CODE_RESOURCE_EXHAUSTED = 8,
    SY_CODE_FAILED_PRECONDITION = 9,
    SY_CODE_ABORTED = 10,
    SY_CODE_UNIMPLEMENTED = 12,
    SY_CODE_INTERNAL = 13,
    SY_CODE_UNAVAILABLE = 14,
};

/// A `TransportError`, field for field. A number that is no SY_CODE_* reads as UNKNOWN.
typedef struct sy_error {
    uint32_t size;               ///< sizeof(sy_error)
    int32_t code;                ///< SY_CODE_*
    const char *reason;          ///< the reason's name, e.g. "refused"; never NULL
    const char *message;         ///< never NULL
    const char *native_domain;   ///< "errno", "libuv", "addrinfo", ...; NULL: no native error
    int32_t native_code;         ///< the native number (when native_domain is set)
    const char *native_name;     ///< e.g. "ECONNREFUSED" (when native_domain is set)
} sy_error;

/// An `Endpoint`: a host and a port, or a Unix-domain socket path.
typedef struct sy_endpoint {
    uint32_t size;               ///< sizeof(sy_endpoint)
    const char *host;            ///< an IP literal or a name; "" for a path endpoint
    int32_t port;                ///< 0...65535; 0 for a path endpoint
    const char *path;            ///< a socket path (`@name`: abstract; "": unnamed); NULL for a host and port
} sy_endpoint;

/// A `TransportConfiguration`.
typedef struct sy_configuration {
    uint32_t size;               ///< sizeof(sy_configuration)
    int64_t event_loop_count;    ///< < 0: one per core
    bool has_stall_timeout;
    sy_duration stall_timeout;   ///< when has_stall_timeout
    int64_t reserved_descriptors;

    // Added after the first fields (a library reads it only when `size` covers it).
    /// `kernelStallDetection`: false turns off the kernel's own stall detection (keepalive,
    /// `TCP_USER_TIMEOUT`) where the backend has one, leaving the stall monitor alone.
    /// Missing: true. A host sends false only to a library whose table's
    /// `configuration_size` covers this field: an older library would ignore it.
    bool kernel_stall_detection;
} sy_configuration;

/// `ConnectOptions`.
typedef struct sy_connect_options {
    uint32_t size;               ///< sizeof(sy_connect_options)
    sy_duration timeout;
} sy_connect_options;

/// `ListenOptions`.
typedef struct sy_listen_options {
    uint32_t size;               ///< sizeof(sy_listen_options)
    int64_t backlog;
} sy_listen_options;

/// Completion of a write, a shutdownOutput or a shutdown: error NULL on success.
typedef void (*sy_done_fn)(void *context, const sy_error *error);
/// An address, borrowed for the call.
typedef void (*sy_endpoint_fn)(void *context, const sy_endpoint *endpoint);
/// The result of transport_make: an owned transport, or the error (exactly one is set).
typedef void (*sy_transport_fn)(void *context, sy_transport *transport, const sy_error *error);
/// The result of a connect: an owned connection, or the error.
typedef void (*sy_connection_fn)(void *context, sy_connection *connection, const sy_error *error);
/// The result of a listen: an owned listener, or the error.
typedef void (*sy_listener_fn)(void *context, sy_listener *listener, const sy_error *error);
/// Work for a loop, or the notice that it will never run.
typedef void (*sy_work_fn)(void *context);

/// A `ConnectionHandler`, called on the connection's loop.
typedef struct sy_handler_callbacks {
    uint32_t size;               ///< sizeof(sy_handler_callbacks)
    /// Bytes arrived; borrowed for the call.
    void (*did_read)(void *context, const void *bytes, size_t count);
    /// The peer shut its output down.
    void (*did_read_end)(void *context);
    /// The write queue drained.
    void (*did_drain_writes)(void *context);
    /// The connection ended: NULL after a local close, else its terminal error.
    void (*did_close)(void *context, const sy_error *error);
    /// The library will call none of these again.
    void (*release)(void *context);
} sy_handler_callbacks;

/// Accepted connections, called on each connection's loop as it is accepted.
typedef struct sy_accept_callbacks {
    uint32_t size;               ///< sizeof(sy_accept_callbacks)
    /// An owned, accepted connection, not yet reading.
    void (*accepted)(void *context, sy_connection *connection);
    /// The library will call `accepted` no more.
    void (*release)(void *context);
} sy_accept_callbacks;

/// The table a backend library hands over. Every function pointer is set, except those
/// marked "may be NULL".
typedef struct sy_backend {
    /// SY_BACKEND_ABI_VERSION as the library was built; read first.
    uint32_t abi_version;
    /// sizeof(sy_backend) as the library was built; read second.
    uint32_t size;
    /// The library's own; passed back to transport_make, never read by the host.
    void *context;

    // The registration (`TransportBackend`).
    const char *name;            ///< the name users pick it by; not empty
    const char *summary;         ///< one line for listings
    const char *network;         ///< backends of one network reach each other: "tcp", ...
    bool uses_sockets;

    // Transport.
    /// Makes a transport; calls `done` before it returns.
    void (*transport_make)(const struct sy_backend *backend, const sy_configuration *configuration,
                           sy_transport_fn done, void *context);
    void (*transport_release)(sy_transport *transport);
    /// Connects; `done` gets a connected connection, not reading yet, or the error.
    /// Returns an owned operation (NULL if it already completed) to cancel it with.
    sy_operation *(*transport_connect)(sy_transport *transport, const sy_endpoint *endpoint,
                                       const sy_connect_options *options, sy_connection_fn done, void *context);
    /// Binds and listens; `done` gets the listener or the error. Returns as connect does.
    sy_operation *(*transport_listen)(sy_transport *transport, const sy_endpoint *endpoint,
                                      const sy_listen_options *options, sy_listener_fn done, void *context);
    /// `shutdown(gracePeriod:)`; `done` (error always NULL) when it has finished.
    void (*transport_shutdown)(sy_transport *transport, sy_duration grace_period, sy_done_fn done, void *context);
    /// `shutdownNow()`; `done` (error always NULL) when it has finished.
    void (*transport_shutdown_now)(sy_transport *transport, sy_done_fn done, void *context);
    /// Cancels a pending connect or listen as a cancelled task would; its `done` still
    /// runs once (with `cancelled`, reason `task cancelled`, unless it won the race).
    void (*operation_cancel)(sy_operation *operation);
    void (*operation_release)(sy_operation *operation);

    // Listener.
    void (*listener_release)(sy_listener *listener);
    void (*listener_local_address)(sy_listener *listener, sy_endpoint_fn result, void *context);
    /// Hands every accepted connection (those accepted before the call too) to
    /// `callbacks->accepted`; call once.
    void (*listener_accept)(sy_listener *listener, const sy_accept_callbacks *callbacks, void *context);
    void (*listener_close)(sy_listener *listener);

    // Connection.
    void (*connection_release)(sy_connection *connection);
    /// The loop the connection lives on (borrowed; the same handle for the same loop).
    sy_loop *(*connection_event_loop)(sy_connection *connection);
    void (*connection_local_address)(sy_connection *connection, sy_endpoint_fn result, void *context);
    void (*connection_remote_address)(sy_connection *connection, sy_endpoint_fn result, void *context);
    void (*connection_set_handler)(sy_connection *connection, const sy_handler_callbacks *callbacks, void *context);
    void (*connection_start_reading)(sy_connection *connection);
    void (*connection_stop_reading)(sy_connection *connection);
    /// `write(borrowing:completion:)`: the bytes are borrowed for the call. `done` may be
    /// NULL (no completion wanted).
    void (*connection_write)(sy_connection *connection, const void *bytes, size_t count,
                             sy_done_fn done, void *context);
    /// `writeNowOrQueue(header:payload:completion:)`, both parts borrowed for the call:
    /// true when every byte is in the kernel on return, and then `done` never runs.
    bool (*connection_write_now_or_queue)(sy_connection *connection, const void *header, size_t header_count,
                                          const void *payload, size_t payload_count, sy_done_fn done, void *context);
    int64_t (*connection_pending_write_bytes)(sy_connection *connection);
    /// `shutdownOutput(completion:)`; `done` may be NULL.
    void (*connection_shutdown_output)(sy_connection *connection, sy_done_fn done, void *context);
    void (*connection_close)(sy_connection *connection);
    void (*connection_reset)(sy_connection *connection);

    // Event loop.
    void (*loop_retain)(sy_loop *loop);
    void (*loop_release)(sy_loop *loop);
    bool (*loop_in_event_loop)(sy_loop *loop);
    /// Queues work on the loop (never inline). Exactly one of `run(context)` (on the loop)
    /// or `drop(context)` (the loop has stopped and refused it; any thread) happens, once.
    void (*loop_execute)(sy_loop *loop, sy_work_fn run, sy_work_fn drop, void *context);

    // Added after the first fields (a host reads it only when `size` covers it).
    /// `TransportBackend.localEndpoint`: an endpoint to listen on for a local test, such
    /// as the conformance kit's listeners (a fresh one each call; for a Unix-domain
    /// backend a new socket path). May be NULL: 127.0.0.1, port 0.
    void (*backend_local_endpoint)(const struct sy_backend *backend, sy_endpoint_fn result, void *context);
    /// sizeof(sy_configuration) as the library was built: which of the configuration's
    /// fields it reads (0, or missing: those of the first version only).
    uint32_t configuration_size;
} sy_backend;

/// The entry point a backend library exports. Returns the same table on every call.
const sy_backend *switchyard_backend_entry(void);

/// The entry point's type, for dlsym.
typedef const sy_backend *(*sy_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
