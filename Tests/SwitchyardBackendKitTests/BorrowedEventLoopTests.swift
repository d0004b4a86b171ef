import Switchyard
import SwitchyardBackendKit
import Synchronization
import Testing

@Suite("A borrowed event loop")
struct BorrowedEventLoopTests {
    @Test("It is its lender: work and deferred work run on the lender's thread, and once the lender stopped, submit says so")
    func forwardsToTheLender() async throws {
        let lender = try WorkerEventLoop(index: 0, name: "borrowed-loop-test")
        let loop = BorrowedEventLoop(lender)
        let ran = Mutex<[String]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let submitted = loop.submit {
                loop.deferToEndOfTurn {
                    ran.withLock { $0.append("deferred") }
                    done.resume()
                }
                ran.withLock { $0.append("work, on the lender: \(lender.inEventLoop && loop.inEventLoop)") }
            }
            #expect(submitted)
        }
        #expect(ran.withLock { $0 } == ["work, on the lender: true", "deferred"])
        #expect(!loop.inEventLoop)
        lender.stopAndJoin()
        #expect(!loop.submit {})
    }
}
