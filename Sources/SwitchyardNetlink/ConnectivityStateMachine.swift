public import Switchyard

/// The connectivity monitor's logic, without I/O: it keeps the interfaces and default
/// routes, debounces bursts of changes, and says when to read the kernel's tables again
/// and which path to report.
///
/// Time is a `Duration` since an origin the caller picks (the monitor uses the moment it
/// started); the machine never reads a clock, so tests drive it with plain numbers. The
/// caller performs each returned ``Action``: it keeps one timer (the latest
/// ``Action/armTimer(deadline:)`` wins) and calls ``timerFired(at:)`` when it expires.
///
/// ## Debouncing
/// The first change after a quiet period opens a burst; the burst is evaluated once no
/// change came for ``Configuration/debounce``, or ``Configuration/maximumDelay`` after it
/// opened, whichever is first. So every burst whose events are less than `debounce`
/// apart, and which lasts less than `maximumDelay`, is at most one reported change;
/// a link that flaps without end is still reported every `maximumDelay`.
public struct ConnectivityStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// How long the tables must stay quiet before a burst is evaluated.
        ///
        /// The default, 50 ms, is longer than the gaps inside the bursts the kernel sends
        /// for one change (one `ip` command: a few messages within a millisecond), and it
        /// makes a flap of 10 toggles within 50 ms at most two reported changes (usually
        /// one, or none when the link ends as it began): such a flap has no gap of 50 ms.
        public var debounce: Duration
        /// The longest a burst is held back: a change is reported this long after the
        /// burst opened even if events keep coming. Default 500 ms. Never less than
        /// `debounce`.
        public var maximumDelay: Duration

        public init(debounce: Duration = .milliseconds(50), maximumDelay: Duration = .milliseconds(500)) {
            self.debounce = max(debounce, .zero)
            self.maximumDelay = max(maximumDelay, self.debounce)
        }
    }

    /// What the caller must do.
    public enum Action: Sendable, Hashable {
        /// Nothing.
        case none
        /// Arm the timer (replacing any armed one) to fire at `deadline`, then call
        /// ``ConnectivityStateMachine/timerFired(at:)``.
        case armTimer(deadline: Duration)
        /// Read the kernel's tables (dump links, addresses and routes) and pass them to
        /// ``ConnectivityStateMachine/resynchronized(_:at:)``, or call
        /// ``ConnectivityStateMachine/resynchronizationFailed(at:)``.
        case resynchronize
        /// Report `path` to observers: it differs from the path reported before.
        case report(ConnectivityPath)
    }

    enum State: Sendable, Hashable {
        /// Made, no tables yet. Events are applied but nothing is reported.
        /// → `settled` on ``load(_:)``.
        case loading
        /// The reported path is what the tables say. An event that changes the tables
        /// → `debouncing` (action: arm the timer); other events and timers → `settled`.
        case settled
        /// The tables changed at `since` and the burst is being collected. An event that
        /// changes the tables moves `deadline` to `min(since + maximumDelay, now +
        /// debounce)` (action: arm the timer) and may set `resynchronize`. The timer at or
        /// after `deadline` → `settled` (action: report if the path differs) or, when
        /// `resynchronize`, → `resynchronizing` (action: resynchronize). An early timer
        /// re-arms.
        case debouncing(since: Duration, deadline: Duration, resynchronize: Bool)
        /// Waiting for the tables to be read. Events are applied and set `dirty`.
        /// ``resynchronized(_:at:)`` → `settled` (action: report if the path differs), or
        /// → `debouncing` when `dirty`; ``resynchronizationFailed(at:)`` → `debouncing`
        /// with `resynchronize` set (to retry after `debounce`).
        case resynchronizing(dirty: Bool)
    }

    public let configuration: Configuration
    private let classify: @Sendable (String) -> ConnectivityCategory
    private(set) var state: State = .loading
    private(set) var tables = NetworkTables()
    /// The path last reported (the initial path after ``load(_:)``).
    public private(set) var reported: ConnectivityPath = .none

    /// - Parameters:
    ///   - classify: The category of an interface, by name (see ``InterfaceClassifier``).
    public init(configuration: Configuration = Configuration(), classify: @escaping @Sendable (String) -> ConnectivityCategory) {
        self.configuration = configuration
        self.classify = classify
    }

    /// The path the tables describe now (which, while a burst is being debounced, may not
    /// be reported yet).
    public var path: ConnectivityPath { tables.path(classify: classify) }

    /// Takes the first reading of the tables and returns the initial path, which becomes
    /// the reported one, without an ``Action/report(_:)``. Meant for `loading`
    /// (→ `settled`); called in another state it starts over the same way: the tables
    /// are replaced, a pending burst is dropped, the state becomes `settled`.
    public mutating func load(_ snapshot: NetworkSnapshot) -> ConnectivityPath {
        tables = NetworkTables(snapshot)
        state = .settled
        reported = path
        return reported
    }

    /// Applies one notification received at `now`.
    public mutating func receive(_ event: NetworkEvent, at now: Duration) -> Action {
        let change = tables.apply(event)
        let resynchronize = change == .needsResynchronization
        switch state {
        case .loading:
            return .none
        case .settled:
            guard change != .none else { return .none }
            let deadline = now + configuration.debounce
            state = .debouncing(since: now, deadline: deadline, resynchronize: resynchronize)
            return .armTimer(deadline: deadline)
        case .debouncing(let since, _, let wasResynchronizing):
            guard change != .none else { return .none }
            let deadline = min(since + configuration.maximumDelay, now + configuration.debounce)
            state = .debouncing(since: since, deadline: deadline, resynchronize: wasResynchronizing || resynchronize)
            return .armTimer(deadline: deadline)
        case .resynchronizing(let dirty):
            state = .resynchronizing(dirty: dirty || change != .none)
            return .none
        }
    }

    /// The timer armed by ``Action/armTimer(deadline:)`` fired at `now`.
    public mutating func timerFired(at now: Duration) -> Action {
        guard case .debouncing(let since, let deadline, let resynchronize) = state else { return .none }
        guard now >= deadline else {
            state = .debouncing(since: since, deadline: deadline, resynchronize: resynchronize)
            return .armTimer(deadline: deadline)
        }
        if resynchronize {
            state = .resynchronizing(dirty: false)
            return .resynchronize
        }
        state = .settled
        return reportIfChanged()
    }

    /// The tables were read again, as asked by ``Action/resynchronize``.
    public mutating func resynchronized(_ snapshot: NetworkSnapshot, at now: Duration) -> Action {
        tables = NetworkTables(snapshot)
        if case .resynchronizing(dirty: true) = state {
            let deadline = now + configuration.debounce
            state = .debouncing(since: now, deadline: deadline, resynchronize: false)
            return .armTimer(deadline: deadline)
        }
        state = .settled
        return reportIfChanged()
    }

    /// Reading the tables failed: try again after ``Configuration/debounce``.
    public mutating func resynchronizationFailed(at now: Duration) -> Action {
        let deadline = now + configuration.debounce
        state = .debouncing(since: now, deadline: deadline, resynchronize: true)
        return .armTimer(deadline: deadline)
    }

    private mutating func reportIfChanged() -> Action {
        let path = self.path
        guard path != reported else { return .none }
        reported = path
        return .report(path)
    }
}
