import Switchyard
@testable import SwitchyardNetlink
import Testing

/// The bytes the kernel sends, built by hand, parsed into events.
@Suite("Parsing rtnetlink messages")
struct NetlinkParserTests {
    private func events(_ build: (inout NetlinkMessageBuilder) -> Void) -> [NetworkEvent] {
        var builder = NetlinkMessageBuilder()
        build(&builder)
        return builder.bytes.withUnsafeBytes { raw in
            NetlinkParser.messages(in: raw).flatMap(NetlinkParser.events(from:))
        }
    }

    private static func link(_ builder: inout NetlinkMessageBuilder, type: UInt16, index: Int32, flags: UInt32, name: String?) {
        builder.message(type: type) { body in
            body += [0, 0]  // ifi_family, pad
            NetlinkMessageBuilder.append(UInt16(1), to: &body)  // ifi_type ARPHRD_ETHER
            NetlinkMessageBuilder.append(index, to: &body)
            NetlinkMessageBuilder.append(flags, to: &body)
            NetlinkMessageBuilder.append(UInt32(0), to: &body)  // ifi_change
            NetlinkMessageBuilder.attribute(4, [0xdc, 0x05, 0, 0], to: &body)  // IFLA_MTU
            if let name { NetlinkMessageBuilder.attribute(RT.linkName, Array(name.utf8) + [0], to: &body) }
        }
    }

    private static func route(
        _ builder: inout NetlinkMessageBuilder, type: UInt16 = RT.newRoute, flags: UInt16 = 0, family: UInt8 = RT.familyIPv4,
        destinationLength: UInt8 = 0, table: UInt8 = 254, routeType: UInt8 = RT.routeTypeUnicast,
        attributes: (inout [UInt8]) -> Void
    ) {
        builder.message(type: type, flags: flags) { body in
            body += [family, destinationLength, 0, 0, table, 4 /* RTPROT_STATIC */, 0 /* RT_SCOPE_UNIVERSE */, routeType]
            NetlinkMessageBuilder.append(UInt32(0), to: &body)  // rtm_flags
            attributes(&body)
        }
    }

    private static func u32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
    private static func i32(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    @Test("RTM_NEWLINK gives the index, name, up and carrier; RTM_DELLINK the index")
    func links() {
        let up: UInt32 = 0x1 | 0x40 | 0x10000  // IFF_UP | IFF_RUNNING | IFF_LOWER_UP
        let parsed = events { builder in
            Self.link(&builder, type: RT.newLink, index: 3, flags: up, name: "wlan0")
            Self.link(&builder, type: RT.newLink, index: 3, flags: 0x1 | 0x10000, name: "wlan0")  // not running yet
            Self.link(&builder, type: RT.newLink, index: 4, flags: 0, name: nil)
            Self.link(&builder, type: RT.deleteLink, index: 4, flags: 0, name: "wwan0")
        }
        #expect(parsed == [
            .interfaceChanged(NetworkInterface(index: 3, name: "wlan0", isUp: true, hasCarrier: true)),
            .interfaceChanged(NetworkInterface(index: 3, name: "wlan0", isUp: true, hasCarrier: false)),
            .interfaceChanged(NetworkInterface(index: 4, name: "", isUp: false, hasCarrier: false)),
            .interfaceRemoved(index: 4),
        ])
    }

    @Test("RTM_NEWADDR and RTM_DELADDR give the interface's own address")
    func addresses() {
        let parsed = events { builder in
            builder.message(type: RT.newAddress) { body in
                body += [RT.familyIPv4, 24, 0, 0] + Self.u32(3)
                NetlinkMessageBuilder.attribute(RT.addressAddress, [10, 0, 0, 9], to: &body)  // peer
                NetlinkMessageBuilder.attribute(RT.addressLocal, [10, 0, 0, 2], to: &body)
            }
            builder.message(type: RT.deleteAddress) { body in
                body += [RT.familyIPv6, 64, 0, 0] + Self.u32(3)
                NetlinkMessageBuilder.attribute(RT.addressAddress, [0xfd] + Array(repeating: 0, count: 14) + [1], to: &body)
            }
        }
        #expect(parsed == [
            .addressAdded(InterfaceAddress(interfaceIndex: 3, family: .ipv4, bytes: [10, 0, 0, 2], prefixLength: 24)),
            .addressRemoved(InterfaceAddress(interfaceIndex: 3, family: .ipv6, bytes: [0xfd] + Array(repeating: 0, count: 14) + [1], prefixLength: 64)),
        ])
    }

    @Test("An address of another size than its family's is left out (found by the netlink fuzzer)")
    func addressOfWrongSize() {
        let parsed = events { builder in
            builder.message(type: RT.newAddress) { body in
                body += [RT.familyIPv4, 24, 0, 0] + Self.u32(3)
                NetlinkMessageBuilder.attribute(RT.addressLocal, [10, 0, 0], to: &body)
            }
            builder.message(type: RT.newAddress) { body in
                body += [RT.familyIPv6, 64, 0, 0] + Self.u32(3)
                NetlinkMessageBuilder.attribute(RT.addressAddress, [10, 0, 0, 2], to: &body)
            }
            builder.message(type: RT.newAddress) { body in
                // A malformed IFA_LOCAL does not hide a good IFA_ADDRESS.
                body += [RT.familyIPv4, 24, 0, 0] + Self.u32(4)
                NetlinkMessageBuilder.attribute(RT.addressAddress, [10, 0, 0, 7], to: &body)
                NetlinkMessageBuilder.attribute(RT.addressLocal, [], to: &body)
            }
        }
        #expect(parsed == [.addressAdded(InterfaceAddress(interfaceIndex: 4, family: .ipv4, bytes: [10, 0, 0, 7], prefixLength: 24))])
    }

    @Test("Default routes of the main table are kept, with metric and gateway")
    func defaultRoutes() {
        let parsed = events { builder in
            Self.route(&builder) { body in
                NetlinkMessageBuilder.attribute(RT.routeTable, Self.u32(254), to: &body)
                NetlinkMessageBuilder.attribute(RT.routeGateway, [10, 0, 0, 1], to: &body)
                NetlinkMessageBuilder.attribute(RT.routeOutput, Self.i32(3), to: &body)
                NetlinkMessageBuilder.attribute(RT.routePriority, Self.u32(600), to: &body)
            }
            Self.route(&builder, type: RT.deleteRoute, family: RT.familyIPv6) { body in
                NetlinkMessageBuilder.attribute(RT.routeOutput, Self.i32(4), to: &body)
                NetlinkMessageBuilder.attribute(RT.routePriority, Self.u32(1024), to: &body)
            }
            Self.route(&builder, flags: RT.replace) { body in
                NetlinkMessageBuilder.attribute(RT.routeOutput, Self.i32(4), to: &body)
            }
        }
        #expect(parsed == [
            .defaultRouteAdded(DefaultRoute(family: .ipv4, interfaceIndex: 3, metric: 600, gateway: [10, 0, 0, 1])),
            .defaultRouteRemoved(DefaultRoute(family: .ipv6, interfaceIndex: 4, metric: 1024)),
            .defaultRouteReplaced(DefaultRoute(family: .ipv4, interfaceIndex: 4, metric: 0)),
        ])
    }

    @Test("Other routes are ignored: a prefix, another table, a non-unicast type, another family")
    func otherRoutes() {
        let output: (inout [UInt8]) -> Void = { NetlinkMessageBuilder.attribute(RT.routeOutput, Self.i32(3), to: &$0) }
        let parsed = events { builder in
            Self.route(&builder, destinationLength: 24, attributes: output)
            Self.route(&builder, table: 255, attributes: output)  // local
            Self.route(&builder, table: 0) { body in  // table 1000, given as RTA_TABLE only
                NetlinkMessageBuilder.attribute(RT.routeTable, Self.u32(1000), to: &body)
                output(&body)
            }
            Self.route(&builder, routeType: 2 /* RTN_LOCAL */, attributes: output)
            Self.route(&builder, routeType: 7 /* RTN_UNREACHABLE */) { _ in }
            Self.route(&builder, family: 7 /* AF_BRIDGE */, attributes: output)
        }
        #expect(parsed.isEmpty)
    }

    @Test("A multipath default route is one route per next hop")
    func multipath() {
        let parsed = events { builder in
            Self.route(&builder) { body in
                NetlinkMessageBuilder.attribute(RT.routePriority, Self.u32(5), to: &body)
                var hops: [UInt8] = []
                for (index, gateway) in [(Int32(3), [UInt8]([10, 0, 0, 1])), (4, [10, 1, 0, 1])] {
                    var attributes: [UInt8] = []
                    NetlinkMessageBuilder.attribute(RT.routeGateway, gateway, to: &attributes)
                    NetlinkMessageBuilder.append(UInt16(8 + attributes.count), to: &hops)
                    hops += [0, 0] + Self.i32(index) + attributes
                }
                NetlinkMessageBuilder.attribute(RT.routeMultipath, hops, to: &body)
            }
        }
        #expect(parsed == [
            .defaultRouteAdded(DefaultRoute(family: .ipv4, interfaceIndex: 3, metric: 5, gateway: [10, 0, 0, 1])),
            .defaultRouteAdded(DefaultRoute(family: .ipv4, interfaceIndex: 4, metric: 5, gateway: [10, 1, 0, 1])),
        ])
    }

    @Test("Truncated and malformed messages end parsing without a crash")
    func malformed() {
        var builder = NetlinkMessageBuilder()
        Self.link(&builder, type: RT.newLink, index: 3, flags: 1, name: "wlan0")
        let whole = builder.bytes
        for cut in 0..<whole.count {
            let prefix = Array(whole[..<cut])
            let parsed = prefix.withUnsafeBytes { NetlinkParser.messages(in: $0).flatMap(NetlinkParser.events(from:)) }
            #expect(parsed.isEmpty, "cut at \(cut)")
        }
        // A length field smaller than a header, and an attribute running past its message.
        var bad = whole
        bad[0] = 4
        #expect(bad.withUnsafeBytes { NetlinkParser.messages(in: $0) }.isEmpty)
        var longAttribute = whole
        longAttribute[32] = 0xff  // first attribute's length
        let parsed = longAttribute.withUnsafeBytes { NetlinkParser.messages(in: $0).flatMap(NetlinkParser.events(from:)) }
        #expect(parsed == [.interfaceChanged(NetworkInterface(index: 3, name: "", isUp: true, hasCarrier: false))])
    }

    @Test("A dump request is a header and a zeroed family header")
    func dumpRequest() {
        let request = NetlinkMessageBuilder.dumpRequest(type: RT.getRoute, familyHeaderSize: RT.routeInfoSize, sequence: 7)
        #expect(request.count == 28)
        #expect(request[0..<4] == [28, 0, 0, 0])
        #expect(request[4..<6] == [26, 0])  // RTM_GETROUTE
        #expect(request[6..<8] == [0x01, 0x03])  // NLM_F_REQUEST | NLM_F_DUMP
        #expect(request[8..<12] == [7, 0, 0, 0])
        #expect(request[16...].allSatisfy { $0 == 0 })
    }
}
