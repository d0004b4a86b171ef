/// The last streams this side reset (or refused), oldest forgotten first: frames the peer
/// sent on them before it saw the RST_STREAM are ignored (RFC 9113 section 5.1, "closed").
struct H2RecentlyResetStreams: Sendable {
    private let capacity: Int
    private var ring: [H2StreamID] = []
    private var next = 0
    private var members: Set<H2StreamID> = []

    init(capacity: Int) { self.capacity = max(0, capacity) }

    mutating func insert(_ id: H2StreamID) {
        guard capacity > 0, !members.contains(id) else { return }
        if ring.count < capacity {
            ring.append(id)
        } else {
            members.remove(ring[next])
            ring[next] = id
            next = (next + 1) % capacity
        }
        members.insert(id)
    }

    func contains(_ id: H2StreamID) -> Bool { members.contains(id) }
}
