import Foundation

/// Waits for an event instead of a fixed time: looks at `probe` every few milliseconds until
/// it gives a value, and fails naming `what` when `seconds` pass first. The deadline is only
/// a bound for a broken daemon; on a working one the wait ends when the event happens.
@discardableResult
func eventually<T>(_ what: @autoclosure () -> String, within seconds: Double = 10,
                   _ probe: () throws -> T?) throws -> T {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        if let value = try probe() { return value }
        guard Date() < deadline else { throw TestFailure("\(what()): not within \(seconds) s") }
        usleep(2_000)
    }
}

/// `eventually` for a condition.
func eventually(_ what: @autoclosure () -> String, within seconds: Double = 10,
                _ condition: () throws -> Bool) throws {
    try eventually(what(), within: seconds) { try condition() ? () : nil }
}
