// The libuv backend is being written; see issue 3.
