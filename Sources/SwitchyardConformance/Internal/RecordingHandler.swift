import Switchyard
import Synchronization

/// A raw ``ConnectionHandler`` that records every event, for scenarios that check the
/// callback face directly (demand-driven reads, close and shutdown callbacks).
final class RecordingHandler: ConnectionHandler {
    struct Events: Sendable {
        /// Every byte delivered, in order.
        var bytes: [UInt8] = []
        /// How many `connectionDidRead` calls there were.
        var readCalls = 0
        /// How many times `connectionDidReadEnd` ran.
        var readEnds = 0
        /// How many times `connectionDidDrainWrites` ran.
        var drains = 0
        /// Every `connectionDidClose` call's error, in order (it must run once).
        var closes: [TransportError?] = []
        /// Bytes delivered after `connectionDidReadEnd` or `connectionDidClose`.
        var lateBytes = 0
        /// Callbacks that ran off the connection's event loop (the contract says never).
        var offLoopCalls: [String] = []
    }

    private let events = Mutex(Events())
    private let loop: any TransportEventLoop

    /// Makes a handler and installs it on `connection` (it does not start reading).
    init(on connection: any Connection) {
        self.loop = connection.eventLoop
        connection.setHandler(self)
    }

    private func checkLoop(_ callback: String, _ events: inout Events) {
        if !loop.inEventLoop { events.offLoopCalls.append(callback) }
    }

    /// A copy of what has been recorded so far.
    var snapshot: Events { events.withLock { $0 } }

    var byteCount: Int { events.withLock { $0.bytes.count } }

    /// What the connection delivered so far, for a wait's failure to quote.
    func seen() -> String {
        let events = snapshot
        let closes = events.closes.map { $0.map { "\($0.code) (\($0.reason))" } ?? "no error" }
        return "that connection had read \(events.bytes.count) bytes, \(events.readEnds) ends of stream, and closed \(closes.isEmpty ? "not yet" : closes.joined(separator: ", "))"
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        events.withLock { events in
            checkLoop("connectionDidRead", &events)
            if events.readEnds > 0 || !events.closes.isEmpty { events.lateBytes += bytes.count }
            events.bytes.append(contentsOf: bytes)
            events.readCalls += 1
        }
    }

    func connectionDidReadEnd() {
        events.withLock { checkLoop("connectionDidReadEnd", &$0); $0.readEnds += 1 }
    }

    func connectionDidDrainWrites() {
        events.withLock { checkLoop("connectionDidDrainWrites", &$0); $0.drains += 1 }
    }

    func connectionDidClose(error: TransportError?) {
        events.withLock { checkLoop("connectionDidClose", &$0); $0.closes.append(error) }
    }
}
