// The libc layer's types that a backend author handles (the descriptor's owner, a typed
// errno and its table, a socket address) are part of the toolkit's API: a backend that
// imports SwitchyardBackendKit names them without importing SwitchyardPosix, which is not
// a product. The rest of that layer (the `Posix` wrappers, `syscall`, signals) is
// `package`: Switchyard's own modules share it; a backend written outside makes its own
// system calls, as Examples/UnixBackend does in UnixSystem.swift.

@_exported public import struct SwitchyardPosix.Socket
@_exported public import struct SwitchyardPosix.SyscallError
@_exported public import struct SwitchyardPosix.SystemSocketAddress
@_exported public import enum SwitchyardPosix.ErrnoTable
@_exported public import struct SwitchyardPosix.FileStatus
