// echo-client's progress line, on standard error, for runs longer than a few seconds.

import Glibc

/// Prints how far a run got: from 2 s after the start, every second on a terminal (one
/// line, rewritten in place) and every 5 seconds otherwise (one line each, so a log shows
/// how far a run got and when it stopped getting further, without a line a second for a
/// long soak). Standard output, which scripts and tests parse, is never touched.
///
///     echo-client: 12 s  messages 480000/1000000 (48%)  40012 msg/s  errors 0
///
/// The rate is over the last interval; `reconnects N` follows with `--reconnect`.
struct ProgressLine {
    let statistics: RunStatistics
    let total: Int
    let reconnects: Bool
    let isTerminal = isatty(2) == 1

    /// Runs until cancelled; then clears the line it left on a terminal.
    func run() async {
        let clock = ContinuousClock()
        let start = clock.now
        let interval: Duration = isTerminal ? .seconds(1) : .seconds(5)
        var last = (at: start, messages: 0)
        var printed = false
        do {
            try await Task.sleep(for: .seconds(2))
            while true {
                let now = clock.now
                let messages = statistics.messages
                let seconds = (now - last.at).seconds
                let rate = seconds > 0 ? Double(messages - last.messages) / seconds : 0
                last = (now, messages)
                let percent = total > 0 ? messages * 100 / total : 0
                var line = "echo-client: \(Int((now - start).seconds)) s  messages \(messages)/\(total) (\(percent)%)  \(format(rate, decimals: 0)) msg/s  errors \(statistics.errorCount)"
                if reconnects { line += "  reconnects \(reconnectCount.load(ordering: .relaxed))" }
                // On a terminal: back to the start of the line, the text, clear the rest.
                writeStandardError(isTerminal ? "\r\(line)\u{1B}[K" : line + "\n")
                printed = true
                try await Task.sleep(for: interval)
            }
        } catch {
            // Cancelled: the run is over.
        }
        if isTerminal, printed { writeStandardError("\r\u{1B}[K") }
    }
}
