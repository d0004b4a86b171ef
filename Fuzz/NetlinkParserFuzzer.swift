// libFuzzer target for the rtnetlink message parser (`NetlinkParser`,
// Sources/SwitchyardNetlink/Internal/NetlinkMessages.swift) and the tables the
// connectivity monitor keeps from its events (`NetworkTables`,
// Sources/SwitchyardNetlink/NetworkTables.swift): what the monitor does with every
// datagram the kernel sends.
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file with those two files and the
// core's files they use (Endpoint.swift for the IP formatters, ConnectivityMonitor.swift
// for the path, TransportError.swift) into one module, `swiftc -sanitize=fuzzer,address`.
// Any broken invariant below is a `fatalError`, which libFuzzer reports as a crash and
// saves as an artifact.
//
// Input: one datagram, as `recv` returns it.
//
// Checked:
// - `messages(in:)` never traps and returns exactly the messages an independent walk of
//   the datagram finds (lengths of at least a header, within the datagram, each at the
//   previous one's aligned end; stops at the first bad length), with the header fields
//   and the payload read from the right bytes (the payload a view into the datagram);
// - `attributes(in:)`, on every payload and behind every family header, likewise, with
//   the nested and byte-order bits cleared from the type;
// - `events(from:)` gives events of the message's type only (link → interface, address
//   → address, route → default routes, others none), at most one per link or address
//   message and one per next hop, with the index, family and prefix read from the
//   family header, and addresses of the family's size (4 or 16 bytes);
// - every event survives a round trip: written as the kernel would write it (with
//   `NetlinkMessageBuilder`), parsed again, the same event; every message too;
// - `NetworkTables`: applying an event a second time changes nothing (`.none`), except
//   an overrun; the path it then describes is over a usable interface that carries a
//   default route, and lists only addresses of that interface, as IP literals.

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("Netlink parser invariant broken: \(message())") }
}

private func uint16(_ bytes: UnsafeRawBufferPointer, _ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
private func uint32(_ bytes: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
    UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
}

/// Whether `inner` is a view into `outer` at `offset`.
private func isView(_ inner: UnsafeRawBufferPointer, of outer: UnsafeRawBufferPointer, at offset: Int, count: Int) -> Bool {
    inner.count == count && (count == 0 || inner.baseAddress == outer.baseAddress! + offset)
}

private func checkMessages(_ datagram: UnsafeRawBufferPointer) -> [NetlinkMessage] {
    let messages = NetlinkParser.messages(in: datagram)
    // The reference walk.
    var offset = 0
    var index = 0
    while datagram.count - offset >= 16 {
        let length = Int(uint32(datagram, offset))
        if length < 16 || length > datagram.count - offset { break }
        check(index < messages.count, "message \(index) at \(offset) (length \(length)) missing; \(messages.count) returned")
        let message = messages[index]
        check(message.type == uint16(datagram, offset + 4) && message.flags == uint16(datagram, offset + 6)
              && message.sequence == uint32(datagram, offset + 8), "message \(index) header")
        check(isView(message.payload, of: datagram, at: offset + 16, count: length - 16), "message \(index) payload")
        offset += (length + 3) & ~3
        index += 1
    }
    check(messages.count == index, "\(messages.count) messages returned, \(index) in the datagram")
    return messages
}

private func checkAttributes(_ bytes: UnsafeRawBufferPointer) {
    let attributes = NetlinkParser.attributes(in: bytes)
    var offset = 0
    var index = 0
    while bytes.count - offset >= 4 {
        let length = Int(uint16(bytes, offset))
        if length < 4 || length > bytes.count - offset { break }
        check(index < attributes.count, "attribute \(index) at \(offset) missing")
        let attribute = attributes[index]
        check(attribute.type == uint16(bytes, offset + 2) & 0x3FFF, "attribute \(index) type \(attribute.type)")
        check(isView(attribute.value, of: bytes, at: offset + 4, count: length - 4), "attribute \(index) value")
        offset += (length + 3) & ~3
        index += 1
    }
    check(attributes.count == index, "\(attributes.count) attributes returned, \(index) in the bytes")
}

private func family(_ raw: UInt8) -> AddressFamily? { raw == 2 ? .ipv4 : raw == 10 ? .ipv6 : nil }
private func rawFamily(_ family: AddressFamily) -> UInt8 { family == .ipv4 ? 2 : 10 }
private func size(_ family: AddressFamily) -> Int { family == .ipv4 ? 4 : 16 }

private func checkEvents(_ events: [NetworkEvent], of message: NetlinkMessage) {
    let payload = message.payload
    let index = payload.count >= 8 ? Int32(bitPattern: uint32(payload, 4)) : 0
    switch message.type {
    case 16, 17:
        check(events.count <= 1, "\(events.count) events from one link message")
        for event in events {
            switch event {
            case .interfaceChanged(let interface):
                check(message.type == 16 && interface.index == index, "link message gave \(event)")
                let flags = uint32(payload, 8)
                check(interface.isUp == (flags & 1 != 0) && interface.hasCarrier == (flags & 0x10040 == 0x10040), "link flags \(flags) gave \(interface)")
                check(!interface.name.utf8.contains(0), "a NUL in the interface name")
            case .interfaceRemoved(let removed):
                check(message.type == 17 && removed == index, "link message gave \(event)")
            default:
                fatalError("link message gave \(event)")
            }
        }
    case 20, 21:
        check(events.count <= 1, "\(events.count) events from one address message")
        for event in events {
            let address: InterfaceAddress
            switch event {
            case .addressAdded(let a) where message.type == 20: address = a
            case .addressRemoved(let a) where message.type == 21: address = a
            default: fatalError("address message of type \(message.type) gave \(event)")
            }
            check(family(payload[0]) == address.family && address.prefixLength == payload[1] && address.interfaceIndex == index,
                  "address message gave \(address)")
            check(address.bytes.count == size(address.family), "an \(address.family) address of \(address.bytes.count) bytes: \(address.bytes)")
        }
    case 24, 25:
        check(events.count <= 1 + payload.count / 8, "\(events.count) routes from a payload of \(payload.count) bytes")
        for (position, event) in events.enumerated() {
            let route: DefaultRoute
            switch event {
            case .defaultRouteAdded(let r) where message.type == 24 && (position > 0 || message.flags & 0x100 == 0): route = r
            case .defaultRouteReplaced(let r) where message.type == 24 && position == 0 && message.flags & 0x100 != 0: route = r
            case .defaultRouteRemoved(let r) where message.type == 25: route = r
            default: fatalError("route message of type \(message.type), flags \(message.flags) gave \(event) at \(position)")
            }
            check(family(payload[0]) == route.family && payload[1] == 0 && payload[7] == 1, "route message gave \(route)")
        }
    default:
        check(events.isEmpty, "message of type \(message.type) gave \(events)")
    }
}

private func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    NetlinkMessageBuilder.append(value, to: &bytes)
}

/// The message the kernel would send for `event`.
private func message(for event: NetworkEvent) -> [UInt8] {
    var builder = NetlinkMessageBuilder()
    switch event {
    case .interfaceChanged(let interface):
        builder.message(type: 16) { body in
            body += [0, 0]
            append(UInt16(1), to: &body)  // ARPHRD_ETHER
            append(interface.index, to: &body)
            append(UInt32(interface.isUp ? 0x1 : 0) | (interface.hasCarrier ? 0x10040 : 0), to: &body)
            append(UInt32(0), to: &body)
            if !interface.name.isEmpty { NetlinkMessageBuilder.attribute(3, Array(interface.name.utf8) + [0], to: &body) }
        }
    case .interfaceRemoved(let index):
        builder.message(type: 17) { body in
            body += [0, 0, 1, 0]
            append(index, to: &body)
            body += [UInt8](repeating: 0, count: 8)
        }
    case .addressAdded(let address), .addressRemoved(let address):
        let type: UInt16 = if case .addressAdded = event { 20 } else { 21 }
        builder.message(type: type) { body in
            body += [rawFamily(address.family), address.prefixLength, 0, 0]
            append(address.interfaceIndex, to: &body)
            NetlinkMessageBuilder.attribute(2, address.bytes, to: &body)
        }
    case .defaultRouteAdded(let route), .defaultRouteReplaced(let route), .defaultRouteRemoved(let route):
        let (type, flags): (UInt16, UInt16) = switch event {
        case .defaultRouteAdded: (24, 0)
        case .defaultRouteReplaced: (24, 0x100)
        default: (25, 0)
        }
        builder.message(type: type, flags: flags) { body in
            // family, dst_len, src_len, tos, table, protocol (boot), scope, type (unicast); flags
            body += [rawFamily(route.family), 0, 0, 0, 254, 3, 0, 1]
            append(UInt32(0), to: &body)
            NetlinkMessageBuilder.attribute(4, withUnsafeBytes(of: route.interfaceIndex) { Array($0) }, to: &body)
            NetlinkMessageBuilder.attribute(6, withUnsafeBytes(of: route.metric) { Array($0) }, to: &body)
            if !route.gateway.isEmpty { NetlinkMessageBuilder.attribute(5, route.gateway, to: &body) }
        }
    case .overrun:
        break
    }
    return builder.bytes
}

private func checkRoundTrip(_ event: NetworkEvent) {
    if case .overrun = event { return }
    let bytes = message(for: event)
    bytes.withUnsafeBytes { raw in
        let messages = NetlinkParser.messages(in: raw)
        check(messages.count == 1, "the message for \(event) parses as \(messages.count) messages")
        let again = NetlinkParser.events(from: messages[0])
        check(again == [event], "round trip: \(event) -> \(again)")
    }
}

private func checkMessageRoundTrip(_ messages: [NetlinkMessage]) {
    var builder = NetlinkMessageBuilder()
    for message in messages {
        builder.message(type: message.type, flags: message.flags, sequence: message.sequence) { $0 += Array(message.payload) }
    }
    builder.bytes.withUnsafeBytes { raw in
        let again = NetlinkParser.messages(in: raw)
        check(again.count == messages.count, "\(messages.count) messages rebuilt parse as \(again.count)")
        for (a, b) in zip(messages, again) {
            check(a.type == b.type && a.flags == b.flags && a.sequence == b.sequence && a.payload.elementsEqual(b.payload),
                  "a rebuilt message differs")
        }
    }
}

private func classify(_ name: String) -> ConnectivityCategory {
    name.hasPrefix("wl") ? .wifi : name.hasPrefix("e") ? .wired : name.isEmpty ? .other : .cellular
}

private func checkTables(_ events: [NetworkEvent]) {
    var tables = NetworkTables()
    for event in events {
        _ = tables.apply(event)
        let before = tables
        let again = tables.apply(event)
        if case .overrun = event {
            check(again == .needsResynchronization, "overrun gave \(again)")
        } else {
            check(again == .none && tables == before, "applying \(event) twice changed the tables again (\(again))")
        }
    }
    let path = tables.path(classify: classify)
    guard let name = path.interface else {
        check(path == .none, "a path without an interface: \(path)")
        check(!tables.defaultRoutes.contains { tables.interfaces[$0.interfaceIndex]?.isUsable == true },
              "no path, but a usable interface carries a default route")
        return
    }
    let carriers = tables.defaultRoutes.compactMap { tables.interfaces[$0.interfaceIndex] }.filter(\.isUsable)
    guard let carrier = carriers.first(where: { $0.name == name }) else {
        fatalError("the path's interface '\(name)' carries no default route or is not usable")
    }
    check(path.category == classify(name), "path category \(path.category) for '\(name)'")
    let own = Set((tables.addresses[carrier.index] ?? []).compactMap(\.pathAddress))
    for address in path.addresses {
        check(IPAddress.parseIPv4(address) != nil || IPAddress.parseIPv6(address) != nil, "path address '\(address)' is no IP literal")
        check(carriers.filter { $0.name == name }.contains { (tables.addresses[$0.index] ?? []).contains { $0.pathAddress == address } },
              "path address \(address) is not an address of '\(name)'")
    }
    if carriers.filter({ $0.name == name }).count == 1 { check(path.addresses == own, "path addresses \(path.addresses), interface has \(own)") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    // A copy, so the parser reads memory of exactly the datagram's size (ASan sees any
    // read past it).
    let datagram = Array(UnsafeBufferPointer(start: data, count: size))
    datagram.withUnsafeBytes { raw in
        let messages = checkMessages(raw)
        checkMessageRoundTrip(messages)
        var all: [NetworkEvent] = []
        for message in messages {
            checkAttributes(message.payload)
            for header in [16, 8, 12] where message.payload.count >= header {
                checkAttributes(UnsafeRawBufferPointer(rebasing: message.payload[header...]))
            }
            let events = NetlinkParser.events(from: message)
            checkEvents(events, of: message)
            for event in events { checkRoundTrip(event) }
            all += events
        }
        checkTables(all)
    }
    return 0
}
