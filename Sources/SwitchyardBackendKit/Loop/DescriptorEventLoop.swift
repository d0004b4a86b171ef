public import CSwitchyardPosix

/// A ``BackendEventLoop`` whose connections are descriptors it watches (epoll, poll,
/// kqueue): it lends them one read buffer and one array of iovecs, so that reading and
/// gathering writes allocate nothing. ``DescriptorStreamConnection`` reads and flushes
/// through them.
///
/// Both are loop-confined: a connection uses them only on its loop, and only for the
/// length of one call, so every connection on the loop shares them.
public protocol DescriptorEventLoop: BackendEventLoop {
    /// The buffer connections on this loop read into. Valid only on the loop.
    var readBuffer: UnsafeMutableRawBufferPointer { get }
    /// Scratch iovecs for gathered writes, ``writeVectorCount`` of them. Valid only on
    /// the loop.
    var writeVectors: UnsafeMutablePointer<iovec> { get }
    /// How many iovecs ``writeVectors`` holds: a flush gathers at most this many queued
    /// writes into one `sendmsg`.
    static var writeVectorCount: Int { get }
}
