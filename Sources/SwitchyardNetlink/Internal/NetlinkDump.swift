import Glibc
import SwitchyardPosix

/// Reads the kernel's tables: dumps of links, addresses and routes over a request socket
/// of their own, so their replies never mix with the notifications.
struct NetlinkDump {
    /// How long one dump may take before it counts as failed.
    static let timeoutMilliseconds: CInt = 2000
    /// A dump the kernel marks interrupted (the tables changed meanwhile) is tried again
    /// this many times in all.
    static let attempts = 3

    private var sequence: UInt32 = 0

    /// Dumps links, addresses and routes, using `buffer` to receive. The socket is made
    /// in the calling thread's network namespace and closed before returning.
    mutating func snapshot(buffer: UnsafeMutableRawBufferPointer) throws(SyscallError) -> NetworkSnapshot {
        let fd = try NetlinkSystem.openRouteSocket(groups: 0)
        defer { try? Posix.close(fd) }
        var attempt = 1
        while true {
            var snapshot = NetworkSnapshot()
            var interrupted = false
            let requests = [(RT.getLink, RT.linkInfoSize), (RT.getAddress, RT.addressInfoSize), (RT.getRoute, RT.routeInfoSize)]
            for (type, headerSize) in requests {
                interrupted = try dump(fd, type: type, headerSize: headerSize, buffer: buffer, into: &snapshot) || interrupted
            }
            if !interrupted || attempt == Self.attempts { return snapshot }
            attempt += 1
        }
    }

    /// One dump; returns whether the kernel marked it interrupted.
    private mutating func dump(
        _ fd: CInt, type: UInt16, headerSize: Int, buffer: UnsafeMutableRawBufferPointer, into snapshot: inout NetworkSnapshot
    ) throws(SyscallError) -> Bool {
        sequence &+= 1
        let sequence = self.sequence
        try NetlinkSystem.send(fd, NetlinkMessageBuilder.dumpRequest(type: type, familyHeaderSize: headerSize, sequence: sequence))
        var interrupted = false
        while true {
            guard try NetlinkSystem.waitReadable([fd], timeoutMilliseconds: Self.timeoutMilliseconds)[0] else {
                throw SyscallError(call: "poll", errno: ETIMEDOUT)
            }
            guard case .done(let length) = try NetlinkSystem.receive(fd, into: buffer) else { continue }
            for message in NetlinkParser.messages(in: UnsafeRawBufferPointer(rebasing: buffer[..<length])) where message.sequence == sequence {
                if message.flags & RT.dumpInterrupted != 0 { interrupted = true }
                switch message.type {
                case RT.done:
                    return interrupted
                case RT.error:
                    let code = NetlinkParser.errorCode(from: message.payload)
                    if code != 0 { throw SyscallError(call: "recv", errno: code) }
                default:
                    for event in NetlinkParser.events(from: message) {
                        switch event {
                        case .interfaceChanged(let interface): snapshot.interfaces.append(interface)
                        case .addressAdded(let address): snapshot.addresses.append(address)
                        case .defaultRouteAdded(let route), .defaultRouteReplaced(let route): snapshot.defaultRoutes.append(route)
                        default: break
                        }
                    }
                }
            }
        }
    }
}
