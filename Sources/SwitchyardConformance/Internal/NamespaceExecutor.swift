import Glibc
import Synchronization

/// A task executor whose one thread lives in a network namespace: code that runs under
/// `withTaskExecutorPreference(executor)` sees that namespace's interfaces, as an
/// application running there would (an interface name in an IPv6 scope, `fe80::1%eth0`,
/// names an interface of the namespace of the thread that looks it up).
///
/// Make it on a thread inside the namespace (``FaultNetwork/run(in:_:)``): the thread it
/// starts begins there. ``stop()`` ends the thread once the jobs queued before it ran.
///
/// Safety of `@unchecked Sendable`: the queue is a mutex, the semaphore is thread-safe,
/// and the thread is the only reader of the jobs.
final class NamespaceExecutor: TaskExecutor, @unchecked Sendable {
    private let jobs = Mutex<(queue: [UnownedJob], stopping: Bool)>(([], false))
    private let semaphore: UnsafeMutablePointer<sem_t>

    /// Starts the thread; nil when it cannot be started.
    init?() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            Unmanaged<NamespaceExecutor>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, box.toOpaque())
        guard status == 0 else {
            box.release()
            return nil
        }
        pthread_detach(thread)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.queue.append(job) }
        sem_post(semaphore)
    }

    /// Ends the thread after the jobs already queued.
    func stop() {
        jobs.withLock { $0.stopping = true }
        sem_post(semaphore)
    }

    private func run() {
        while true {
            while sem_wait(semaphore) != 0 {}
            let next = jobs.withLock { jobs -> UnownedJob?? in
                if !jobs.queue.isEmpty { return .some(jobs.queue.removeFirst()) }
                return jobs.stopping ? .none : .some(nil)
            }
            guard let next else { return }
            next?.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
