import Switchyard
import SwitchyardBackends
import SwitchyardTestSupport

/// A backend that breaks the contract on purpose: the memory backend, except that every
/// write completion on a client connection runs twice. The kit must report it FAILED
/// (write completions run exactly once), never passed.
enum DoubledCompletionBackend {
    static let name = "doubled"

    /// Registered as ``name`` on the memory backend's network (it connects to memory
    /// listeners).
    static var backend: TransportBackend {
        TransportBackend(
            name: name, summary: "memory, but every client write completion runs twice (a test double)",
            usesSockets: false, network: "memory"
        ) { configuration in
            DoubledCompletionTransport(try Backends.registry.backend(named: "memory").make(configuration))
        }
    }
}

/// A transport whose client connections run each write completion twice.
final class DoubledCompletionTransport: Transport {
    let base: any Transport

    init(_ base: any Transport) {
        self.base = base
    }

    var name: String { DoubledCompletionBackend.name }

    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        DoubledCompletionConnection(try await base.connect(to: endpoint, options: options))
    }

    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try await base.listen(on: endpoint, options: options)
    }

    func shutdown(gracePeriod: Duration) async {
        await base.shutdown(gracePeriod: gracePeriod)
    }

    func shutdownNow() async {
        await base.shutdownNow()
    }
}

/// A connection that forwards everything to its base, and runs each write's completion twice.
final class DoubledCompletionConnection: ForwardingConnection {
    let base: any Connection

    init(_ base: any Connection) {
        self.base = base
    }

    var backendName: String { DoubledCompletionBackend.name }

    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        base.write(bytes, completion: twice(completion))
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        base.write(borrowing: bytes, completion: twice(completion))
    }

    private func twice(_ completion: WriteCompletion?) -> WriteCompletion? {
        guard let completion else { return nil }
        return { error in
            completion(error)
            completion(error)
        }
    }
}
