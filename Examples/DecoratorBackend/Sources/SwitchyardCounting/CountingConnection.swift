import Switchyard

/// `bsd`'s connection, its writes passed through ``WriteHook`` and its bytes counted.
/// Every entry point keeps its own semantics by calling the same entry point of `bsd`'s
/// connection: `write(borrowing:)` stays borrowed, `writeNowOrQueue` returns what `bsd`
/// returned (its completion then never runs, as the contract says), and each completion
/// is `bsd`'s, run once. `backendName` is the decorator's; the rest is `bsd`'s.
final class CountingConnection<Hook: WriteHook>: Connection {
    private let inner: any Connection
    private let counter: ByteCounter

    init(wrapping inner: any Connection, counter: ByteCounter) {
        self.inner = inner
        self.counter = counter
    }

    var backendName: String { Hook.backendName }
    var eventLoop: any TransportEventLoop { inner.eventLoop }
    var localAddress: Endpoint { inner.localAddress }
    var remoteAddress: Endpoint { inner.remoteAddress }
    var pendingWriteBytes: Int { inner.pendingWriteBytes }

    func setHandler(_ handler: any ConnectionHandler) {
        inner.setHandler(CountingHandler(wrapping: handler, counter: counter))
    }

    func startReading() { inner.startReading() }
    func stopReading() { inner.stopReading() }
    func shutdownOutput(completion: WriteCompletion?) { inner.shutdownOutput(completion: completion) }
    func close() { inner.close() }
    func reset() { inner.reset() }

    // doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        inner.write(passedOn(bytes), completion: completion)
    }

    func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        inner.writeNowOrQueue(passedOn(bytes), completion: completion)
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        let count = Hook.bytesPassedOn(of: bytes.count)
        counter.wrote(count)
        inner.write(borrowing: UnsafeRawBufferPointer(rebasing: bytes.prefix(count)), completion: completion)
    }

    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        let count = Hook.bytesPassedOn(of: header.count + payload.count)
        counter.wrote(count)
        if count >= header.count {
            let kept = count - header.count
            return inner.writeNowOrQueue(
                header: header, payload: kept == payload.count ? payload : Array(payload.prefix(kept)), completion: completion)
        }
        return inner.writeNowOrQueue(header: UnsafeRawBufferPointer(rebasing: header.prefix(count)), payload: [], completion: completion)
    }

    /// The bytes a write passes on, counted: the array itself (no copy) when the hook
    /// keeps them all.
    private func passedOn(_ bytes: [UInt8]) -> [UInt8] {
        let count = Hook.bytesPassedOn(of: bytes.count)
        counter.wrote(count)
        return count == bytes.count ? bytes : Array(bytes.prefix(count))
    }
    // doc-block end
}

/// The user's handler behind a counter. Every callback goes on, `connectionDidDrainWrites`
/// too: the protocol's default implementation of it does nothing, so a wrapper that
/// forgot it would swallow the drain event.
final class CountingHandler: ConnectionHandler {
    private let inner: any ConnectionHandler
    private let counter: ByteCounter

    init(wrapping inner: any ConnectionHandler, counter: ByteCounter) {
        self.inner = inner
        self.counter = counter
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        counter.read(bytes.count)
        inner.connectionDidRead(bytes)
    }

    func connectionDidReadEnd() { inner.connectionDidReadEnd() }
    func connectionDidDrainWrites() { inner.connectionDidDrainWrites() }
    func connectionDidClose(error: TransportError?) { inner.connectionDidClose(error: error) }
}
