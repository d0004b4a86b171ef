import Switchyard
import SwitchyardBackendKit
import Testing

@Suite("Name resolution rules")
struct NameResolutionTests {
    @Test("A backend of hosts and ports refuses a path endpoint with invalidArgument naming it")
    func pathEndpointIsRefused() throws {
        let endpoint = Endpoint(unixPath: "/tmp/switchyard.sock")
        #expect {
            try NameResolution.checkHostAndPort(endpoint)
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.code == .invalidArgument && error.reason == .invalidAddress && error.message.contains("unix:/tmp/switchyard.sock")
        }
        // The address conversion every socket backend goes through refuses it the same way.
        #expect {
            _ = try SystemSocketAddress(literal: endpoint)
        } throws: { error in
            (error as? TransportError)?.reason == .invalidAddress
        }
        try NameResolution.checkHostAndPort(Endpoint(host: "127.0.0.1", port: 1))
        try NameResolution.checkHostAndPort(Endpoint(host: "localhost", port: 1))
        #expect(throws: TransportError.self) { try NameResolution.checkHostAndPort(Endpoint(host: "bad host", port: 1)) }
    }

    @Test("Names under .invalid fail at once with name resolution", arguments: ["invalid", "a.invalid", "A.INVALID."])
    func invalidNames(host: String) {
        #expect {
            try NameResolution.checkResolvable(host)
        } throws: { error in
            (error as? TransportError)?.reason == .nameResolution
        }
    }
}
