import Glibc
import Switchyard
@testable import SwitchyardBSD
import SwitchyardBackendKit
import Testing
import SwitchyardPosix

/// The stall detector's decisions, without sockets: TCP_INFO snapshots and instants are
/// the inputs (the clock is injected as `start + offset`).
@Suite("Stall detector")
struct StallDetectorTests {
    let start = ContinuousClock.now
    let timeout = Duration.seconds(2)

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    func info(
        unacked: UInt32 = 0, notSent: UInt32 = 0, sinceSent: UInt32 = 0, sinceAck: UInt32 = 0,
        window: UInt32? = 65_536
    ) -> TCPInfo {
        TCPInfo(
            unackedSegments: unacked, notSentBytes: notSent, millisecondsSinceDataSent: sinceSent,
            millisecondsSinceDataReceived: 0, millisecondsSinceAckReceived: sinceAck, peerWindow: window)
    }

    @Test("Nothing outstanding is never a stall, however long the peer is silent")
    func idleIsNotAStall() {
        var detector = StallDetector(timeout: timeout)
        for second in 0..<60 {
            let action = detector.observe(
                info(sinceSent: UInt32(second * 1000), sinceAck: UInt32(second * 1000)), queuedBytes: 0, at: at(second * 1000))
            #expect(action == .none)
        }
        #expect(detector.state == .idle)
    }

    @Test("Data in flight with no acknowledgement for the stall timeout is a stall, and the state is then final")
    func unackedDataStalls() {
        var detector = StallDetector(timeout: timeout)
        // Sent at 0 ms; the last acknowledgement came just before.
        #expect(detector.observe(info(unacked: 3, sinceSent: 0, sinceAck: 0), queuedBytes: 0, at: at(0)) == .none)
        #expect(detector.state == .waiting(firstSeen: at(0)))
        #expect(detector.observe(info(unacked: 3, sinceSent: 1000, sinceAck: 1000), queuedBytes: 0, at: at(1000)) == .none)
        #expect(detector.observe(info(unacked: 3, sinceSent: 1999, sinceAck: 1999), queuedBytes: 0, at: at(1999)) == .none)
        #expect(detector.observe(info(unacked: 3, sinceSent: 2000, sinceAck: 2000), queuedBytes: 0, at: at(2000)) == .stall(waited: .seconds(2)))
        #expect(detector.state == .stalled)
        #expect(detector.observe(info(unacked: 3, sinceSent: 3000, sinceAck: 3000), queuedBytes: 0, at: at(3000)) == .none)
        #expect(!detector.needsObservation(wroteSinceLastObservation: true))
    }

    @Test("Acknowledgements that keep coming are progress, even while data stays outstanding")
    func acksAreProgress() {
        var detector = StallDetector(timeout: timeout)
        for step in 0..<40 {
            // Unacknowledged data for 20 s, but acknowledgements arrive every 500 ms (a slow path).
            let action = detector.observe(
                info(unacked: 10, notSent: 1 << 20, sinceSent: 0, sinceAck: 0), queuedBytes: 4 << 20, at: at(step * 500))
            #expect(action == .none)
        }
        #expect(detector.state == .waiting(firstSeen: at(0)))
    }

    @Test("Bytes held back by the peer's closed window are flow control, never a stall, however long")
    func zeroWindowIsFlowControl() {
        var detector = StallDetector(timeout: timeout)
        for second in 0..<30 {
            let action = detector.observe(
                info(notSent: 1 << 20, sinceSent: UInt32(second * 1000), sinceAck: UInt32(second * 1000), window: 0),
                queuedBytes: 4 << 20, at: at(second * 1000))
            #expect(action == .none)
        }
        #expect(detector.state == .idle)
        // A kernel that does not report the window is taken the same, careful way.
        #expect(detector.observe(info(notSent: 1, sinceSent: 9000, sinceAck: 9000, window: nil), queuedBytes: 0, at: at(40_000)) == .none)
        #expect(detector.state == .idle)
    }

    @Test("Bytes the kernel cannot send through an open window (the link went down) are outstanding")
    func unsendableBytesStall() {
        var detector = StallDetector(timeout: timeout)
        // Written at 100 ms after the last exchange at 0; nothing could be transmitted since.
        #expect(detector.observe(info(notSent: 1 << 20, sinceSent: 200, sinceAck: 200), queuedBytes: 0, at: at(200)) == .none)
        #expect(detector.observe(info(notSent: 1 << 20, sinceSent: 1000, sinceAck: 1000), queuedBytes: 1 << 20, at: at(1000)) == .none)
        #expect(detector.observe(info(notSent: 1 << 20, sinceSent: 2000, sinceAck: 2000), queuedBytes: 1 << 20, at: at(2000)) == .stall(waited: .seconds(2)))
    }

    @Test("A write after a long quiet spell is not taken for a stall because the last acknowledgement is old")
    func oldAckDoesNotCount() {
        var detector = StallDetector(timeout: timeout)
        #expect(detector.observe(info(sinceSent: 60_000, sinceAck: 60_000), queuedBytes: 0, at: at(0)) == .none)
        // Seen at 10 s: sent 100 ms ago, last acknowledgement 70 s ago.
        #expect(detector.observe(info(unacked: 1, sinceSent: 100, sinceAck: 70_000), queuedBytes: 0, at: at(10_000)) == .none)
        // Still waiting 1.5 s after the send.
        #expect(detector.observe(info(unacked: 1, sinceSent: 1600, sinceAck: 71_500), queuedBytes: 0, at: at(11_500)) == .none)
        // The stall timeout after the send: stalled, having waited since the send.
        #expect(detector.observe(info(unacked: 1, sinceSent: 2100, sinceAck: 72_000), queuedBytes: 0, at: at(12_000)) == .stall(waited: .milliseconds(2100)))
    }

    @Test("The first observation bounds the start of the wait when new data keeps being sent without acknowledgement")
    func firstSeenBoundsTheWait() {
        var detector = StallDetector(timeout: timeout)
        // Acknowledgements stopped at 0; data goes on being sent (the sender's window is not yet full).
        #expect(detector.observe(info(unacked: 5, sinceSent: 0, sinceAck: 0), queuedBytes: 0, at: at(0)) == .none)
        #expect(detector.observe(info(unacked: 9, sinceSent: 0, sinceAck: 1000), queuedBytes: 0, at: at(1000)) == .none)
        #expect(detector.observe(info(unacked: 9, sinceSent: 0, sinceAck: 2000), queuedBytes: 0, at: at(2000)) == .stall(waited: .seconds(2)))
    }

    @Test("Data that drains returns the detector to idle, and a later wait starts afresh")
    func drainResets() {
        var detector = StallDetector(timeout: timeout)
        #expect(detector.observe(info(unacked: 2, sinceSent: 0, sinceAck: 0), queuedBytes: 0, at: at(0)) == .none)
        #expect(detector.observe(info(unacked: 0, sinceSent: 1500, sinceAck: 1500), queuedBytes: 0, at: at(1500)) == .none)
        #expect(detector.state == .idle)
        #expect(detector.observe(info(unacked: 2, sinceSent: 0, sinceAck: 1900), queuedBytes: 0, at: at(3400)) == .none)
        #expect(detector.state == .waiting(firstSeen: at(3400)))
        #expect(detector.observe(info(unacked: 2, sinceSent: 1900, sinceAck: 3800), queuedBytes: 0, at: at(5300)) == .none)
        #expect(detector.observe(info(unacked: 2, sinceSent: 2000, sinceAck: 3900), queuedBytes: 0, at: at(5400)) == .stall(waited: .seconds(2)))
    }

    @Test("Bytes only in the connection's own queue count as outstanding")
    func userQueueCounts() {
        var detector = StallDetector(timeout: timeout)
        #expect(detector.observe(info(sinceSent: 0, sinceAck: 0), queuedBytes: 10, at: at(0)) == .none)
        #expect(detector.state == .waiting(firstSeen: at(0)))
        #expect(detector.observe(info(sinceSent: 2500, sinceAck: 2500), queuedBytes: 10, at: at(2500)) == .stall(waited: .milliseconds(2500)))
    }

    @Test("An idle connection that wrote nothing since the last sweep is not read; a waiting one always is")
    func skipsIdleConnections() {
        var detector = StallDetector(timeout: timeout)
        #expect(!detector.needsObservation(wroteSinceLastObservation: false))
        #expect(detector.needsObservation(wroteSinceLastObservation: true))
        _ = detector.observe(info(unacked: 1), queuedBytes: 0, at: at(0))
        #expect(detector.needsObservation(wroteSinceLastObservation: false))
    }

    @Test("The sweep interval is a quarter of the stall timeout, within 100 ms and 1 s")
    func sweepInterval() {
        #expect(StallMonitor.sweepInterval(for: .seconds(2)) == .milliseconds(500))
        #expect(StallMonitor.sweepInterval(for: .milliseconds(200)) == .milliseconds(100))
        #expect(StallMonitor.sweepInterval(for: .seconds(60)) == .seconds(1))
    }

    @Test("Kernel settings for a stall timeout: keepalive after 1 s, probes filling the timeout, TCP_USER_TIMEOUT equal to it")
    func kernelSettings() {
        let two = StallSettings(timeout: .seconds(2))
        #expect(two.keepaliveIdle == 1 && two.keepaliveInterval == 1 && two.keepaliveCount == 1)
        #expect(two.userTimeoutMilliseconds == 2000)
        let thirty = StallSettings(timeout: .seconds(30))
        #expect(thirty.keepaliveIdle == 1)
        #expect(thirty.keepaliveInterval * thirty.keepaliveCount <= 29 && thirty.keepaliveCount <= 9)
        #expect(StallSettings(timeout: .milliseconds(1500)).userTimeoutMilliseconds == 1500)
    }

    @Test("With a stall timeout the kernel's stall errors mean stalled; without one they keep the table's reasons")
    func errnoMapping() {
        for (name, code) in [("ETIMEDOUT", ETIMEDOUT), ("EHOSTUNREACH", EHOSTUNREACH), ("ENETUNREACH", ENETUNREACH)] {
            let stalled = ErrnoTable.connectionError(errno: code, message: "test", stallDetection: true)
            #expect(stalled.code == .unavailable && stalled.reason == .stalled, "\(name): \(stalled)")
            #expect(stalled.native?.name == name)
            let plain = ErrnoTable.connectionError(errno: code, message: "test", stallDetection: false)
            #expect(plain == ErrnoTable.error(errno: code, message: "test"))
            #expect(plain.reason == (name == "ETIMEDOUT" ? .timedOut : .unreachable))
        }
        let reset = ErrnoTable.connectionError(errno: ECONNRESET, message: "test", stallDetection: true)
        #expect(reset.reason == .reset)
    }
}
