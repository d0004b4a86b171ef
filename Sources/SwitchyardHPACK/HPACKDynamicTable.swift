/// The dynamic table of RFC 7541 section 4: fields in the order they were added, the newest
/// at HPACK index 62, bounded by a maximum size in octets.
///
/// An entry's size is its name and value octets plus 32. Adding an entry first evicts the
/// oldest ones until it fits; an entry larger than the maximum size empties the table and
/// is not added (section 4.4). Lowering the maximum size evicts until the table fits
/// (section 4.3). The encoder and the decoder each keep one, and they stay equal as long
/// as both sides follow the same blocks.
///
/// Storage is a ring over an array that grows by doubling: adding and evicting move no
/// entries, and the fields' octets are shared with the fields handed out (no copy).
package struct HPACKDynamicTable: Sendable {
    /// The sum of the entries' sizes.
    package private(set) var size = 0
    /// The most `size` may be: the last size update's value.
    package private(set) var maxSize: Int
    /// The number of entries.
    package private(set) var count = 0

    private var slots: [HPACKField] = []
    /// The slot of the oldest entry.
    private var oldest = 0

    package init(maxSize: Int) {
        precondition(maxSize >= 0, "a negative HPACK table size: \(maxSize)")
        self.maxSize = maxSize
    }

    /// The entry `offset` places from the newest (HPACK index 62 + `offset`).
    package subscript(offset: Int) -> HPACKField {
        precondition(offset >= 0 && offset < count, "HPACK dynamic table offset \(offset) of \(count)")
        return slots[(oldest + count - 1 - offset) % slots.count]
    }

    /// The entries, newest first (as the RFC's examples list them).
    package var entries: [HPACKField] { (0..<count).map { self[$0] } }

    /// Adds a field (its indexing is not kept), evicting the oldest entries to make room.
    package mutating func add(name: [UInt8], value: [UInt8]) {
        let entrySize = name.count + value.count + 32
        guard entrySize <= maxSize else {
            while count > 0 { evictOldest() }
            return
        }
        while size + entrySize > maxSize { evictOldest() }
        if count == slots.count { grow() }
        slots[(oldest + count) % slots.count] = HPACKField(name: name, value: value)
        count += 1
        size += entrySize
    }

    /// Sets the maximum size (a dynamic table size update), evicting until the table fits.
    package mutating func setMaxSize(_ newValue: Int) {
        precondition(newValue >= 0, "a negative HPACK table size: \(newValue)")
        maxSize = newValue
        while size > maxSize { evictOldest() }
    }

    private mutating func evictOldest() {
        let entry = slots[oldest]
        size -= entry.size
        slots[oldest] = HPACKField(name: [], value: [])
        oldest = (oldest + 1) % slots.count
        count -= 1
    }

    /// Doubles the slots, the entries moved to the front oldest first.
    private mutating func grow() {
        var grown: [HPACKField] = []
        grown.reserveCapacity(max(8, slots.count * 2))
        for position in 0..<count { grown.append(slots[(oldest + position) % slots.count]) }
        while grown.count < grown.capacity { grown.append(HPACKField(name: [], value: [])) }
        slots = grown
        oldest = 0
    }
}
