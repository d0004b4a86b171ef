public import Switchyard

/// A test's decorator of a connection: everything forwards to `base` unless the decorator
/// implements it (a write whose completion is held, or run twice, ...).
public protocol ForwardingConnection: Connection {
    var base: any Connection { get }
}

extension ForwardingConnection {
    public var backendName: String { base.backendName }
    public var eventLoop: any TransportEventLoop { base.eventLoop }
    public var localAddress: Endpoint { base.localAddress }
    public var remoteAddress: Endpoint { base.remoteAddress }
    public var pendingWriteBytes: Int { base.pendingWriteBytes }

    public func setHandler(_ handler: any ConnectionHandler) { base.setHandler(handler) }
    public func startReading() { base.startReading() }
    public func stopReading() { base.stopReading() }
    public func write(_ bytes: [UInt8], completion: WriteCompletion?) { base.write(bytes, completion: completion) }
    public func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        base.write(borrowing: bytes, completion: completion)
    }
    public func shutdownOutput(completion: WriteCompletion?) { base.shutdownOutput(completion: completion) }
    public func close() { base.close() }
    public func reset() { base.reset() }
}
