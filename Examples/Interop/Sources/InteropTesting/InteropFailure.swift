/// A test case's check that did not hold, saying what differed.
package struct InteropFailure: Error, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// Fails with `message` unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws(InteropFailure) {
    if !condition { throw InteropFailure(message()) }
}
