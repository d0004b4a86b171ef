import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization
import Testing
import SwitchyardPosix

/// Records what a connection's callbacks reported, in order.
private final class Log: Sendable {
    private let entries = Mutex<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }

    func completion(_ name: String) -> WriteCompletion {
        { error in self.add("\(name): \(error.map { "\($0.code) (\($0.reason))" } ?? "ok")") }
    }
}

private final class Handler: ConnectionHandler, Sendable {
    let log: Log
    let name: String
    init(_ log: Log, _ name: String = "handler") {
        self.log = log
        self.name = name
    }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { log.add("\(name) read \(bytes.count)") }
    func connectionDidReadEnd() { log.add("\(name) read end") }
    func connectionDidClose(error: TransportError?) {
        log.add("\(name) closed: \(error.map { "\($0.code) (\($0.reason))" } ?? "nil")")
    }
}

@Suite("The connection contract as a state machine, without I/O")
struct ConnectionStateMachineTests {
    @Test("Writes complete once each, in order, as their bytes are taken; a partly taken write keeps only its tail")
    func writesCompleteInOrder() {
        let log = Log()
        var machine = ConnectionStateMachine()
        machine.enqueue([1, 2, 3], completion: log.completion("a"))
        machine.enqueue([4, 5, 6, 7], offset: 1, completion: log.completion("b"))
        machine.enqueue([8], completion: nil)
        #expect(machine.pendingWriteBytes == 7)
        #expect(machine.record.pendingBytes == 7)
        var completed: [WriteCompletion] = []
        let shutdownAfterFour = machine.writesTaken(4, completed: &completed)
        #expect(!shutdownAfterFour)
        #expect(completed.count == 1)
        #expect(machine.writes.entries.first?.offset == 2)
        #expect(machine.pendingWriteBytes == 3)
        let shutdownAfterSeven = machine.writesTaken(3, completed: &completed)
        #expect(!shutdownAfterSeven)
        for completion in completed { completion(nil) }
        #expect(log.all == ["a: ok", "b: ok"])
        #expect(machine.writes.isEmpty)
        #expect(machine.record.pendingBytes == 0)
    }

    @Test("The end fails the pending writes with the error, then the output shutdown, then tells the handler once")
    func endReportsInOrder() {
        let log = Log()
        var machine = ConnectionStateMachine()
        let action = machine.setHandler(Handler(log))
        #expect(action.isInstalled)
        machine.enqueue([1, 2], completion: log.completion("a"))
        machine.enqueue([3], completion: log.completion("b"))
        guard case .afterPendingWrites = machine.shutdownOutput(log.completion("shutdown")) else {
            Issue.record("a shutdown with writes pending must wait for them")
            return
        }
        let reset = TransportError(code: .unavailable, reason: .reset, message: "reset")
        let ending = machine.end(with: reset)
        ending?.run()
        #expect(log.all == [
            "a: unavailable (reset)", "b: unavailable (reset)", "shutdown: unavailable (reset)",
            "handler closed: unavailable (reset)",
        ])
        let second = machine.end(with: nil)
        #expect(second == nil, "a connection ends once")
        #expect(machine.record.end == ConnectionEnd(error: reset))
    }

    @Test("Writes the kernel took before the end complete without an error; the partly taken one fails")
    func bytesTakenBeforeTheEnd() {
        let log = Log()
        var machine = ConnectionStateMachine()
        machine.enqueue([1, 2], completion: log.completion("a"))
        machine.enqueue([3, 4], completion: log.completion("b"))
        machine.enqueue([5], completion: log.completion("c"))
        machine.end(with: nil, bytesTaken: 3)?.run()
        #expect(log.all == ["a: ok", "b: cancelled (closed)", "c: cancelled (closed)"])
    }

    @Test("Refusals: after the end the terminal error, after shutdownOutput 'output shut down', a second shutdown too")
    func refusals() {
        var machine = ConnectionStateMachine()
        #expect(machine.writeRefusal == nil)
        guard case .shutDownNow = machine.shutdownOutput(nil) else {
            Issue.record("a shutdown with nothing pending goes at once")
            return
        }
        #expect(machine.writeRefusal?.reason == .outputShutdown)
        guard case .refuse(let error) = machine.shutdownOutput(nil) else {
            Issue.record("a second shutdownOutput must be refused")
            return
        }
        #expect(error.code == .failedPrecondition)
        _ = machine.end(with: .transportShutdown())
        #expect(machine.writeRefusal?.code == .cancelled)
        #expect(machine.writeRefusal?.reason == .shutdown)

        var closed = ConnectionStateMachine()
        _ = closed.end(with: nil)
        #expect(closed.writeRefusal?.reason == .closed)
    }

    @Test("A handler set after the end hears it once, unless an earlier handler did")
    func lateHandlers() {
        let log = Log()
        var unheard = ConnectionStateMachine()
        _ = unheard.end(with: nil)
        guard case .reportEnd(let first, let error) = unheard.setHandler(Handler(log, "late")) else {
            Issue.record("the first late handler must hear the end")
            return
        }
        first.connectionDidClose(error: error)
        guard case .none = unheard.setHandler(Handler(log, "later")) else {
            Issue.record("a second late handler must hear nothing")
            return
        }
        #expect(log.all == ["late closed: nil"])

        var heard = ConnectionStateMachine()
        _ = heard.setHandler(Handler(log, "early"))
        heard.end(with: nil)?.run()
        guard case .none = heard.setHandler(Handler(log, "late")) else {
            Issue.record("a late handler after the first heard the end must hear nothing")
            return
        }
        // Off the loop (its loop stopped), the record answers the same way.
        heard.record.reportEndToLateHandler(Handler(log, "off-loop"))
        #expect(log.all == ["late closed: nil", "early closed: nil"])
    }

    @Test("After the loops stopped, a late write completes on the caller's thread with the recorded end")
    func lateWrites() {
        let log = Log()
        var machine = ConnectionStateMachine()
        machine.record.completeLateWrite(log.completion("never reached its loop"))
        _ = machine.end(with: .transportShutdown())
        machine.record.completeLateWrite(log.completion("after shutdown"))
        #expect(log.all == ["never reached its loop: cancelled (shutdown)", "after shutdown: cancelled (shutdown)"])
    }

    @Test("A pending output shutdown starts once the last write is taken, and completes once")
    func pendingShutdown() {
        let log = Log()
        var machine = ConnectionStateMachine()
        machine.enqueue([1, 2], completion: log.completion("a"))
        _ = machine.shutdownOutput(log.completion("shutdown"))
        var completed: [WriteCompletion] = []
        let dueAfterOne = machine.writesTaken(1, completed: &completed)
        let dueAfterTwo = machine.writesTaken(1, completed: &completed)
        #expect(!dueAfterOne)
        #expect(dueAfterTwo)
        let shuttingDown = machine.isShuttingDownOutput
        #expect(shuttingDown)
        guard case .some(.some(let completion)) = machine.finishOutputShutdown(error: nil) else {
            Issue.record("the shutdown's completion must be handed back once")
            return
        }
        completion(nil)
        let again = machine.finishOutputShutdown(error: nil)
        #expect(again == nil)
        #expect(machine.writeRefusal?.reason == .outputShutdown)
        #expect(log.all == ["shutdown: ok"])
    }

    @Test("Reads: demand is recorded once, the end of stream is delivered once, nothing after the end")
    func readDemand() {
        let log = Log()
        var machine = ConnectionStateMachine()
        _ = machine.setHandler(Handler(log))
        let first = machine.startReading()
        #expect(first)
        let twice = machine.startReading()
        #expect(!twice)
        let reading = machine.shouldRead
        #expect(reading)
        machine.readDidEnd()?.connectionDidReadEnd()
        let secondEnd = machine.readDidEnd()
        #expect(secondEnd == nil)
        let readingAfterEnd = machine.shouldRead
        #expect(!readingAfterEnd)
        _ = machine.end(with: nil)
        let stopped = machine.stopReading()
        #expect(!stopped)
        #expect(log.all == ["handler read end"])
    }
}

extension ConnectionStateMachine.HandlerAction {
    fileprivate var isInstalled: Bool {
        if case .installed = self { return true }
        return false
    }
}

@Suite("Stall settings")
struct StallSettingsTests {
    @Test("The keepalive budget tracks the stall timeout", arguments: [1, 2, 3, 5, 10, 30, 60, 300])
    func keepaliveTiming(seconds: Int) {
        let timing = StallSettings(timeout: .seconds(seconds))
        let budget = Int(timing.keepaliveIdle + timing.keepaliveInterval * timing.keepaliveCount)
        #expect(timing.keepaliveIdle == 1)
        #expect(timing.keepaliveCount >= 1 && timing.keepaliveCount <= 9)
        #expect(budget <= max(2, seconds))
        #expect(budget >= max(2, seconds) * 8 / 10, "budget \(budget) s for a stall timeout of \(seconds) s")
        #expect(timing.userTimeoutMilliseconds == UInt32(seconds * 1000))
    }

    @Test("With kernel detection off, apply(to:) sets neither keepalive nor TCP_USER_TIMEOUT; on, it sets both")
    func kernelDetectionSwitch() throws {
        var configuration = TransportConfiguration(stallTimeout: .seconds(3))
        #expect(try StallSettings.of(configuration)?.kernelDetection == true)
        configuration.kernelStallDetection = false
        let off = try #require(try StallSettings.of(configuration))
        #expect(!off.kernelDetection)
        for settings in [off, StallSettings(timeout: .seconds(3))] {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            try #require(fd >= 0)
            defer { close(fd) }
            try settings.apply(to: fd)
            let keepalive = try Posix.getOption(fd, level: SOL_SOCKET, name: SO_KEEPALIVE, as: CInt.self, initial: -1)
            let userTimeout = try Posix.getOption(fd, level: CInt(IPPROTO_TCP), name: TCP_USER_TIMEOUT, as: UInt32.self, initial: 1)
            if settings.kernelDetection {
                #expect(keepalive == 1)
                #expect(userTimeout == 3000)
            } else {
                #expect(keepalive == 0)
                #expect(userTimeout == 0)
            }
        }
    }

    @Test("A stall the kernel reported says so in its message and keeps the errno")
    func kernelStallMessage() {
        let error = ErrnoTable.connectionError(errno: ETIMEDOUT, message: "reading", stallDetection: true)
        #expect(error.reason == .stalled)
        #expect(error.message.hasSuffix(ErrnoTable.kernelDetectorNote))
        #expect(error.message.contains("stall detected by the kernel"))
        #expect(error.native?.name == "ETIMEDOUT")
        let plain = ErrnoTable.connectionError(errno: ETIMEDOUT, message: "reading", stallDetection: false)
        #expect(plain.reason == .timedOut)
    }

    @Test("Names under .invalid fail at once with unavailable (name resolution); others pass", arguments: ["invalid", "a.invalid", "A.INVALID.", "example.com"])
    func invalidNames(host: String) {
        let error: TransportError?
        do {
            try NameResolution.checkResolvable(host)
            error = nil
        } catch let caught {
            error = caught
        }
        if host == "example.com" {
            #expect(error == nil)
        } else {
            #expect(error?.code == .unavailable)
            #expect(error?.reason == .nameResolution)
        }
    }
}
