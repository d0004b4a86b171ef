// The floor for resident memory: the smallest Swift program there is, one that says it is
// up and waits for its standard input to end. Benchmarks/run measures its peak RSS beside
// the echo servers' (same toolchain, same dynamic linking of the Swift runtime), so the
// share of an echo server's RSS that no server code can remove is measured, not assumed.
import Glibc

print("ready")
fflush(nil)  // every output stream; stdout is a pipe here, so fully buffered
while readLine() != nil {}
