// rtnetlink messages: the constants, structure layouts and parsing the monitor needs,
// from <linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>, <linux/if_addr.h> and
// <linux/if.h> (kernel ABI, stable). Declared here rather than imported so that the
// shared C module keeps its headers. Pure: bytes in, events out.

/// Netlink and rtnetlink constants.
enum RT {
    static let familyNetlink: UInt16 = 16  // AF_NETLINK
    static let protocolRoute: Int32 = 0  // NETLINK_ROUTE
    static let familyUnspecified: UInt8 = 0  // AF_UNSPEC
    static let familyIPv4: UInt8 = 2  // AF_INET
    static let familyIPv6: UInt8 = 10  // AF_INET6

    // nlmsg_type
    static let noop: UInt16 = 1  // NLMSG_NOOP
    static let error: UInt16 = 2  // NLMSG_ERROR
    static let done: UInt16 = 3  // NLMSG_DONE
    static let overrun: UInt16 = 4  // NLMSG_OVERRUN
    static let newLink: UInt16 = 16  // RTM_NEWLINK
    static let deleteLink: UInt16 = 17  // RTM_DELLINK
    static let getLink: UInt16 = 18  // RTM_GETLINK
    static let newAddress: UInt16 = 20  // RTM_NEWADDR
    static let deleteAddress: UInt16 = 21  // RTM_DELADDR
    static let getAddress: UInt16 = 22  // RTM_GETADDR
    static let newRoute: UInt16 = 24  // RTM_NEWROUTE
    static let deleteRoute: UInt16 = 25  // RTM_DELROUTE
    static let getRoute: UInt16 = 26  // RTM_GETROUTE

    // nlmsg_flags
    static let request: UInt16 = 0x1  // NLM_F_REQUEST
    static let multi: UInt16 = 0x2  // NLM_F_MULTI
    static let dumpInterrupted: UInt16 = 0x10  // NLM_F_DUMP_INTR
    static let replace: UInt16 = 0x100  // NLM_F_REPLACE (on a new object)
    static let dump: UInt16 = 0x300  // NLM_F_ROOT | NLM_F_MATCH

    // Multicast groups (the legacy bit masks for nl_groups).
    static let groupLink: UInt32 = 0x1  // RTMGRP_LINK
    static let groupIPv4Address: UInt32 = 0x10  // RTMGRP_IPV4_IFADDR
    static let groupIPv4Route: UInt32 = 0x40  // RTMGRP_IPV4_ROUTE
    static let groupIPv6Address: UInt32 = 0x100  // RTMGRP_IPV6_IFADDR
    static let groupIPv6Route: UInt32 = 0x400  // RTMGRP_IPV6_ROUTE
    static let monitorGroups = groupLink | groupIPv4Address | groupIPv6Address | groupIPv4Route | groupIPv6Route

    // Interface flags (ifi_flags)
    static let interfaceUp: UInt32 = 0x1  // IFF_UP
    static let interfaceRunning: UInt32 = 0x40  // IFF_RUNNING
    static let interfaceLowerUp: UInt32 = 0x10000  // IFF_LOWER_UP

    // Attributes
    static let linkName: UInt16 = 3  // IFLA_IFNAME
    static let addressAddress: UInt16 = 1  // IFA_ADDRESS
    static let addressLocal: UInt16 = 2  // IFA_LOCAL
    static let routeOutput: UInt16 = 4  // RTA_OIF
    static let routeGateway: UInt16 = 5  // RTA_GATEWAY
    static let routePriority: UInt16 = 6  // RTA_PRIORITY
    static let routeMultipath: UInt16 = 9  // RTA_MULTIPATH
    static let routeTable: UInt16 = 15  // RTA_TABLE

    static let tableMain: UInt32 = 254  // RT_TABLE_MAIN
    static let routeTypeUnicast: UInt8 = 1  // RTN_UNICAST
    static let routeFlagCloned: UInt32 = 0x200  // RTM_F_CLONED

    // Sizes
    static let headerSize = 16  // struct nlmsghdr
    static let linkInfoSize = 16  // struct ifinfomsg
    static let addressInfoSize = 8  // struct ifaddrmsg
    static let routeInfoSize = 12  // struct rtmsg
    static let nextHopSize = 8  // struct rtnexthop
    static let errorSize = 4  // the int at the start of struct nlmsgerr

    /// NLMSG_ALIGN / RTA_ALIGN / RTNH_ALIGN: round up to 4.
    static func align(_ length: Int) -> Int { (length + 3) & ~3 }
}

/// One netlink message inside a datagram.
struct NetlinkMessage {
    var type: UInt16
    var flags: UInt16
    var sequence: UInt32
    /// The bytes after the header.
    var payload: UnsafeRawBufferPointer
}

enum NetlinkParser {
    /// The messages of one datagram, in order; stops at a malformed length.
    static func messages(in datagram: UnsafeRawBufferPointer) -> [NetlinkMessage] {
        var messages: [NetlinkMessage] = []
        var offset = 0
        while datagram.count - offset >= RT.headerSize {
            let length = Int(datagram.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            guard length >= RT.headerSize, length <= datagram.count - offset else { break }
            messages.append(NetlinkMessage(
                type: datagram.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self),
                flags: datagram.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self),
                sequence: datagram.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self),
                payload: UnsafeRawBufferPointer(rebasing: datagram[(offset + RT.headerSize)..<(offset + length)])))
            offset += RT.align(length)
        }
        return messages
    }

    /// The attributes (type, value) in `bytes`; the nested flag (0x8000) and byte-order
    /// flag (0x4000) bits are cleared from the type.
    static func attributes(in bytes: UnsafeRawBufferPointer) -> [(type: UInt16, value: UnsafeRawBufferPointer)] {
        var attributes: [(type: UInt16, value: UnsafeRawBufferPointer)] = []
        var offset = 0
        while bytes.count - offset >= 4 {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            guard length >= 4, length <= bytes.count - offset else { break }
            let type = bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self) & 0x3FFF
            attributes.append((type, UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + length)])))
            offset += RT.align(length)
        }
        return attributes
    }

    /// The events a message describes: none for messages the monitor does not follow
    /// (routes other than main-table unicast defaults, families other than IP, ...), more
    /// than one for a multipath default route.
    static func events(from message: NetlinkMessage) -> [NetworkEvent] {
        switch message.type {
        case RT.newLink, RT.deleteLink:
            guard let interface = interface(from: message.payload) else { return [] }
            return message.type == RT.newLink ? [.interfaceChanged(interface)] : [.interfaceRemoved(index: interface.index)]
        case RT.newAddress, RT.deleteAddress:
            guard let address = address(from: message.payload) else { return [] }
            return message.type == RT.newAddress ? [.addressAdded(address)] : [.addressRemoved(address)]
        case RT.newRoute, RT.deleteRoute:
            let routes = defaultRoutes(from: message.payload)
            if message.type == RT.deleteRoute { return routes.map { .defaultRouteRemoved($0) } }
            // A replacement by a multipath route replaces the old route once, then adds
            // the other next hops.
            guard message.flags & RT.replace != 0, let first = routes.first else { return routes.map { .defaultRouteAdded($0) } }
            return [.defaultRouteReplaced(first)] + routes.dropFirst().map { .defaultRouteAdded($0) }
        default:
            return []
        }
    }

    static func interface(from payload: UnsafeRawBufferPointer) -> NetworkInterface? {
        guard payload.count >= RT.linkInfoSize else { return nil }
        let index = payload.loadUnaligned(fromByteOffset: 4, as: Int32.self)
        let flags = payload.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
        var name = ""
        for attribute in attributes(in: UnsafeRawBufferPointer(rebasing: payload[RT.linkInfoSize...])) where attribute.type == RT.linkName {
            name = string(attribute.value)
        }
        let carrier = RT.interfaceLowerUp | RT.interfaceRunning
        return NetworkInterface(
            index: index, name: name, isUp: flags & RT.interfaceUp != 0, hasCarrier: flags & carrier == carrier)
    }

    static func address(from payload: UnsafeRawBufferPointer) -> InterfaceAddress? {
        guard payload.count >= RT.addressInfoSize, let family = family(payload[0]) else { return nil }
        let prefixLength = payload[1]
        let index = Int32(bitPattern: payload.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        var address: [UInt8]?
        var local: [UInt8]?
        // An address of another size than the family's is malformed: left out, so that an
        // InterfaceAddress always has 4 or 16 bytes.
        let size = family == .ipv4 ? 4 : 16
        for attribute in attributes(in: UnsafeRawBufferPointer(rebasing: payload[RT.addressInfoSize...])) where attribute.value.count == size {
            switch attribute.type {
            case RT.addressAddress: address = Array(attribute.value)
            case RT.addressLocal: local = Array(attribute.value)
            default: break
            }
        }
        // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on a
        // point-to-point link and the same as IFA_LOCAL otherwise (IPv6 sends only it).
        guard let bytes = local ?? address else { return nil }
        return InterfaceAddress(interfaceIndex: index, family: family, bytes: bytes, prefixLength: prefixLength)
    }

    static func defaultRoutes(from payload: UnsafeRawBufferPointer) -> [DefaultRoute] {
        guard payload.count >= RT.routeInfoSize, let family = family(payload[0]) else { return [] }
        let destinationLength = payload[1]
        let headerTable = UInt32(payload[4])
        let type = payload[7]
        let flags = payload.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
        guard destinationLength == 0, type == RT.routeTypeUnicast, flags & RT.routeFlagCloned == 0 else { return [] }
        var table = headerTable
        var output: Int32?
        var gateway: [UInt8] = []
        var metric: UInt32 = 0
        var multipath: UnsafeRawBufferPointer?
        for attribute in attributes(in: UnsafeRawBufferPointer(rebasing: payload[RT.routeInfoSize...])) {
            switch attribute.type {
            case RT.routeTable where attribute.value.count >= 4: table = attribute.value.loadUnaligned(as: UInt32.self)
            case RT.routeOutput where attribute.value.count >= 4: output = attribute.value.loadUnaligned(as: Int32.self)
            case RT.routeGateway: gateway = Array(attribute.value)
            case RT.routePriority where attribute.value.count >= 4: metric = attribute.value.loadUnaligned(as: UInt32.self)
            case RT.routeMultipath: multipath = attribute.value
            default: break
            }
        }
        guard table == RT.tableMain else { return [] }
        if let output {
            return [DefaultRoute(family: family, interfaceIndex: output, metric: metric, gateway: gateway)]
        }
        guard let multipath else { return [] }
        // struct rtnexthop { u16 len; u8 flags; u8 hops; int ifindex; } then attributes.
        var routes: [DefaultRoute] = []
        var offset = 0
        while multipath.count - offset >= RT.nextHopSize {
            let length = Int(multipath.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            guard length >= RT.nextHopSize, length <= multipath.count - offset else { break }
            let index = multipath.loadUnaligned(fromByteOffset: offset + 4, as: Int32.self)
            var hopGateway: [UInt8] = []
            let hopAttributes = UnsafeRawBufferPointer(rebasing: multipath[(offset + RT.nextHopSize)..<(offset + length)])
            for attribute in attributes(in: hopAttributes) where attribute.type == RT.routeGateway {
                hopGateway = Array(attribute.value)
            }
            routes.append(DefaultRoute(family: family, interfaceIndex: index, metric: metric, gateway: hopGateway))
            offset += RT.align(length)
        }
        return routes
    }

    /// The errno of an NLMSG_ERROR message (0 for an acknowledgement).
    static func errorCode(from payload: UnsafeRawBufferPointer) -> Int32 {
        guard payload.count >= RT.errorSize else { return 0 }
        return -payload.loadUnaligned(as: Int32.self)
    }

    private static func family(_ raw: UInt8) -> AddressFamily? {
        switch raw {
        case RT.familyIPv4: .ipv4
        case RT.familyIPv6: .ipv6
        default: nil
        }
    }

    private static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}

/// Builds netlink messages (tests use it to make what the kernel would send).
struct NetlinkMessageBuilder {
    private(set) var bytes: [UInt8] = []

    /// A dump request: header and a zeroed family header of `familyHeaderSize` bytes.
    static func dumpRequest(type: UInt16, familyHeaderSize: Int, sequence: UInt32) -> [UInt8] {
        var builder = NetlinkMessageBuilder()
        builder.message(type: type, flags: RT.request | RT.dump, sequence: sequence) { body in
            body.append(contentsOf: repeatElement(0, count: familyHeaderSize))
        }
        return builder.bytes
    }

    /// Appends one message whose body `fill` writes after the header.
    mutating func message(type: UInt16, flags: UInt16 = 0, sequence: UInt32 = 0, _ fill: (inout [UInt8]) -> Void) {
        var body: [UInt8] = []
        fill(&body)
        let length = RT.headerSize + body.count
        Self.append(UInt32(length), to: &bytes)
        Self.append(type, to: &bytes)
        Self.append(flags, to: &bytes)
        Self.append(sequence, to: &bytes)
        Self.append(UInt32(0), to: &bytes)
        bytes.append(contentsOf: body)
        bytes.append(contentsOf: repeatElement(0, count: RT.align(length) - length))
    }

    /// Appends an attribute (padded) to a message body.
    static func attribute(_ type: UInt16, _ value: [UInt8], to body: inout [UInt8]) {
        let length = 4 + value.count
        append(UInt16(length), to: &body)
        append(type, to: &body)
        body.append(contentsOf: value)
        body.append(contentsOf: repeatElement(0, count: RT.align(length) - length))
    }

    static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value) { bytes.append(contentsOf: $0) }
    }
}
