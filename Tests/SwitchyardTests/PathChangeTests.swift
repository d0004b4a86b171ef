import Switchyard
import Testing

@Suite("PathChange: which connections a change of the network path ends")
struct PathChangeTests {
    let wlan0 = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.5", "2001:db8:1::5"])
    let wlan1 = ConnectivityPath(category: .wifi, interface: "wlan1", addresses: ["10.2.0.7"])
    let wwan0 = ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["100.64.0.9"])

    func from(_ host: String) -> Endpoint { Endpoint(host: host, port: 40_000) }

    @Test("Another category is a category change: every connection ends, connectivity changed, loopback too")
    func categoryChange() throws {
        let change = PathChange(from: wlan0, to: wwan0)
        #expect(change.kind == .category)
        #expect(change.reason == .connectivityChanged)
        let error = try #require(change.error)
        #expect(error.code == .unavailable && error.reason == .connectivityChanged)
        for host in ["10.1.0.5", "100.64.0.9", "127.0.0.1", "192.168.1.1"] {
            #expect(change.ends(connectionFrom: from(host)), "\(host)")
        }
        #expect(change.ends(connectionFrom: Endpoint(unixPath: "/run/app.sock")))
        #expect(PathChange(from: wlan0, to: .none).kind == .category)
        #expect(PathChange(from: .none, to: wlan0).kind == .category)
    }

    @Test("The default route on another interface of the same category is a path change: connections from the old path's addresses end")
    func interfaceMove() throws {
        let change = PathChange(from: wlan0, to: wlan1)
        #expect(change.kind == .path)
        #expect(change.reason == .pathChanged)
        #expect(change.removedAddresses == ["10.1.0.5", "2001:db8:1::5"])
        let error = try #require(change.error)
        #expect(error.code == .unavailable && error.reason == .pathChanged)
        #expect(error.message.contains("wlan0") && error.message.contains("wlan1"), "\(error.message)")
        #expect(change.ends(connectionFrom: from("10.1.0.5")))
        #expect(change.ends(connectionFrom: from("2001:db8:1::5")))
    }

    @Test("A path change spares loopback, Unix-domain, the new interface's and other interfaces' connections")
    func spared() {
        let change = PathChange(from: wlan0, to: wlan1)
        #expect(!change.ends(connectionFrom: from("127.0.0.1")))
        #expect(!change.ends(connectionFrom: from("127.3.4.5")))
        #expect(!change.ends(connectionFrom: from("::1")))
        #expect(!change.ends(connectionFrom: from("::ffff:127.0.0.1")))
        #expect(!change.ends(connectionFrom: Endpoint(unixPath: "@switchyard")))
        #expect(!change.ends(connectionFrom: from("10.2.0.7")), "made over wlan1 before the report")
        #expect(!change.ends(connectionFrom: from("192.168.1.20")), "eth0, reached by a route of its own")
    }

    @Test("Addresses compare as addresses: IPv4-mapped, zones and spelling do not matter")
    func addressForms() {
        let change = PathChange(from: wlan0, to: wlan1)
        #expect(change.ends(connectionFrom: from("::ffff:10.1.0.5")))
        #expect(change.ends(connectionFrom: from("2001:0db8:0001:0000:0000:0000:0000:0005")))
        #expect(change.ends(connectionFrom: from("2001:DB8:1::5%wlan0")))
        let renamed = PathChange(
            from: wlan0, to: ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["::ffff:10.1.0.5", "2001:db8:1:0::5"]))
        #expect(renamed.kind == .none, "the same addresses, spelt otherwise")
    }

    @Test("A move whose old path lists no addresses ends every connection but loopback and Unix-domain ones")
    func unknownAddresses() {
        let change = PathChange(
            from: ConnectivityPath(category: .wifi, interface: "wlan0"), to: ConnectivityPath(category: .wifi, interface: "wlan1"))
        #expect(change.kind == .path)
        #expect(change.ends(connectionFrom: from("10.1.0.5")))
        #expect(change.ends(connectionFrom: from("192.168.1.20")))
        #expect(!change.ends(connectionFrom: from("127.0.0.1")))
        #expect(!change.ends(connectionFrom: Endpoint(unixPath: "/tmp/s")))
    }

    @Test("An address of the same interface gone is a path change that ends only the connections from it")
    func addressRemoved() throws {
        let renewed = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.6", "2001:db8:1::5"])
        let change = PathChange(from: wlan0, to: renewed)
        #expect(change.kind == .path)
        #expect(change.removedAddresses == ["10.1.0.5"])
        #expect(change.ends(connectionFrom: from("10.1.0.5")))
        #expect(!change.ends(connectionFrom: from("10.1.0.6")))
        #expect(!change.ends(connectionFrom: from("2001:db8:1::5")))
        let error = try #require(change.error)
        #expect(error.reason == .pathChanged && error.message.contains("10.1.0.5"), "\(error.message)")
    }

    @Test("New addresses alone, the same path, or none to none end nothing")
    func nothing() {
        var more = wlan0
        more.addresses.insert("10.1.0.99")
        for change in [PathChange(from: wlan0, to: more), PathChange(from: wlan0, to: wlan0), PathChange(from: .none, to: .none)] {
            #expect(change.kind == .none, "\(change)")
            #expect(change.reason == nil)
            #expect(change.error == nil)
            #expect(!change.ends(connectionFrom: from("10.1.0.5")))
        }
    }

    @Test("The path's description is unchanged by its addresses")
    func description() {
        #expect(wlan0.description == "wifi (wlan0)")
        #expect(ConnectivityPath(category: .wifi, interface: "wlan0") != wlan0, "addresses are part of the path")
    }
}
