/// A list of layer directories checked as one (for `mount`, `--patches-from`, `layers --set` and
/// `.layers` alike): no directory given twice, none inside another (a change in one would change
/// the other behind the daemon's back). In O(n log n), so that 10,000 layers check at once.
public enum LayerList {
    /// The most patches a mount can have.
    public static let patchLimit = 10_000

    /// Why two layers, by their positions in the list, are not apart.
    public enum Problem: Equatable, Sendable {
        /// The same directory at both positions.
        case same(Int, Int)
        /// The layer at the first position lies inside the one at the second.
        case inside(Int, Int)

        /// The later of the two positions: problems are told in the order the list gives them.
        var later: Int {
            switch self {
            case .same(let a, let b), .inside(let a, let b): max(a, b)
            }
        }
    }

    /// The problem among `paths` (absolute and canonical) whose later layer comes first in the
    /// list; nil when every layer is apart from every other. Sorted by their names, a layer's
    /// descendants follow it at once, so comparing neighbours finds every kind of problem.
    public static func problem(_ paths: [RawPath]) -> Problem? {
        let names = paths.map { $0.bytes.split(separator: RawPath.slash, omittingEmptySubsequences: true) }
        let order = names.indices.sorted { a, b in
            names[a].lexicographicallyPrecedes(names[b]) { $0.lexicographicallyPrecedes($1) }
        }
        var found: Problem? = nil
        for (upper, lower) in zip(order, order.dropFirst()) {
            let problem: Problem
            if names[upper].elementsEqual(names[lower]) {
                problem = .same(min(upper, lower), max(upper, lower))
            } else if names[lower].starts(with: names[upper]) {
                problem = .inside(lower, upper)
            } else {
                continue
            }
            if problem.later < found?.later ?? Int.max { found = problem }
        }
        return found
    }
}
