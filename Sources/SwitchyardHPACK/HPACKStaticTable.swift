/// The static table of RFC 7541 Appendix A: 61 fields at indexes 1 to 61, before the
/// dynamic table's (section 2.3.3).
package enum HPACKStaticTable {
    /// The entries; index `i` (1-based, as on the wire) is `entries[i - 1]`.
    package static let entries: [HPACKField] = [
        HPACKField(":authority", ""),  // 1
        HPACKField(":method", "GET"),  // 2
        HPACKField(":method", "POST"),  // 3
        HPACKField(":path", "/"),  // 4
        HPACKField(":path", "/index.html"),  // 5
        HPACKField(":scheme", "http"),  // 6
        HPACKField(":scheme", "https"),  // 7
        HPACKField(":status", "200"),  // 8
        HPACKField(":status", "204"),  // 9
        HPACKField(":status", "206"),  // 10
        HPACKField(":status", "304"),  // 11
        HPACKField(":status", "400"),  // 12
        HPACKField(":status", "404"),  // 13
        HPACKField(":status", "500"),  // 14
        HPACKField("accept-charset", ""),  // 15
        HPACKField("accept-encoding", "gzip, deflate"),  // 16
        HPACKField("accept-language", ""),  // 17
        HPACKField("accept-ranges", ""),  // 18
        HPACKField("accept", ""),  // 19
        HPACKField("access-control-allow-origin", ""),  // 20
        HPACKField("age", ""),  // 21
        HPACKField("allow", ""),  // 22
        HPACKField("authorization", ""),  // 23
        HPACKField("cache-control", ""),  // 24
        HPACKField("content-disposition", ""),  // 25
        HPACKField("content-encoding", ""),  // 26
        HPACKField("content-language", ""),  // 27
        HPACKField("content-length", ""),  // 28
        HPACKField("content-location", ""),  // 29
        HPACKField("content-range", ""),  // 30
        HPACKField("content-type", ""),  // 31
        HPACKField("cookie", ""),  // 32
        HPACKField("date", ""),  // 33
        HPACKField("etag", ""),  // 34
        HPACKField("expect", ""),  // 35
        HPACKField("expires", ""),  // 36
        HPACKField("from", ""),  // 37
        HPACKField("host", ""),  // 38
        HPACKField("if-match", ""),  // 39
        HPACKField("if-modified-since", ""),  // 40
        HPACKField("if-none-match", ""),  // 41
        HPACKField("if-range", ""),  // 42
        HPACKField("if-unmodified-since", ""),  // 43
        HPACKField("last-modified", ""),  // 44
        HPACKField("link", ""),  // 45
        HPACKField("location", ""),  // 46
        HPACKField("max-forwards", ""),  // 47
        HPACKField("proxy-authenticate", ""),  // 48
        HPACKField("proxy-authorization", ""),  // 49
        HPACKField("range", ""),  // 50
        HPACKField("referer", ""),  // 51
        HPACKField("refresh", ""),  // 52
        HPACKField("retry-after", ""),  // 53
        HPACKField("server", ""),  // 54
        HPACKField("set-cookie", ""),  // 55
        HPACKField("strict-transport-security", ""),  // 56
        HPACKField("transfer-encoding", ""),  // 57
        HPACKField("user-agent", ""),  // 58
        HPACKField("vary", ""),  // 59
        HPACKField("via", ""),  // 60
        HPACKField("www-authenticate", ""),  // 61
    ]

    /// Where a field is in the static table: the lowest index with its name, and the index
    /// of the entry with its name and value if there is one.
    package static func find(name: [UInt8], value: [UInt8]) -> (nameIndex: Int, fieldIndex: Int?)? {
        guard let found = byName[name] else { return nil }
        return (found.nameIndex, found.values[value])
    }

    /// Per name: its lowest index and the index of each of its values.
    private static let byName: [[UInt8]: (nameIndex: Int, values: [[UInt8]: Int])] = {
        var table: [[UInt8]: (nameIndex: Int, values: [[UInt8]: Int])] = [:]
        for (offset, entry) in entries.enumerated() {
            table[entry.name, default: (offset + 1, [:])].values[entry.value] = offset + 1
        }
        return table
    }()
}
