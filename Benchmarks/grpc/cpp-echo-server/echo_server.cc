// cpp-echo-server: gRPC's own C++ server as the limit of Switchyard's gRPC benchmark.
//
// Serves /switchyard.bench.Echo/Unary (one message in, the same bytes back) and
// /switchyard.bench.Echo/Stream (bidirectional: every message is written back as it
// arrives; status OK once the client's stream ends) over plaintext HTTP/2 (h2c), on the
// callback API, with one grpc::CallbackGenericService: messages stay grpc::ByteBuffer and
// are never parsed, so no protobuf code is generated and the bytes any client sends come
// back unchanged, as from the grpc-swift peer and Switchyard's server. Any other method
// ends with UNIMPLEMENTED.
//
//   cpp-echo-server PORT [HOST]     PORT 0 picks one; HOST defaults to 127.0.0.1
//
// Prints `listening on PORT` once bound, then serves until it is killed.

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace {

const char kUnary[] = "/switchyard.bench.Echo/Unary";
const char kStream[] = "/switchyard.bench.Echo/Stream";

// Unary: reads the one request message and answers it with the same bytes and OK in one
// operation. A request without a message ends with INTERNAL.
class UnaryEcho final : public grpc::ServerGenericBidiReactor {
 public:
  UnaryEcho() { StartRead(&message_); }

  void OnReadDone(bool ok) override {
    if (ok) {
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      Finish(grpc::Status(grpc::StatusCode::INTERNAL, "unary call without a request message"));
    }
  }

  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer message_;
};

// Bidirectional: one read and one write in flight at a time (the most the callback API
// allows), with up to kMaxPending messages read but not yet written between them, so
// reading the next message overlaps writing the last. Reactions may run on different
// threads, so the state is under a mutex; the Start* calls are made after it is released.
class StreamEcho final : public grpc::ServerGenericBidiReactor {
 public:
  StreamEcho() {
    reading_ = true;
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    Actions next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      if (ok) {
        pending_.emplace_back();
        pending_.back().Swap(&incoming_);
      } else {
        read_closed_ = true;
      }
      next = Plan();
    }
    Run(next);
  }

  void OnWriteDone(bool ok) override {
    Actions next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        // The call is gone (cancelled or the connection closed): stop echoing.
        read_closed_ = true;
        pending_.clear();
        failed_ = true;
      }
      next = Plan();
    }
    Run(next);
  }

  void OnDone() override { delete this; }

 private:
  static constexpr size_t kMaxPending = 16;

  struct Actions {
    bool write = false;
    bool read = false;
    bool finish = false;
  };

  // Under mu_: what to start next.
  Actions Plan() {
    Actions next;
    if (!writing_ && !pending_.empty()) {
      outgoing_.Swap(&pending_.front());
      pending_.pop_front();
      writing_ = true;
      next.write = true;
    }
    if (!reading_ && !read_closed_ && pending_.size() < kMaxPending) {
      reading_ = true;
      next.read = true;
    }
    if (read_closed_ && !reading_ && !writing_ && pending_.empty() && !finished_) {
      finished_ = true;
      next.finish = true;
    }
    return next;
  }

  void Run(const Actions& next) {
    if (next.write) StartWrite(&outgoing_);
    if (next.read) StartRead(&incoming_);
    if (next.finish) {
      Finish(failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "write failed") : grpc::Status::OK);
    }
  }

  std::mutex mu_;
  grpc::ByteBuffer incoming_;
  grpc::ByteBuffer outgoing_;
  std::deque<grpc::ByteBuffer> pending_;
  bool reading_ = false;
  bool writing_ = false;
  bool read_closed_ = false;
  bool finished_ = false;
  bool failed_ = false;
};

class Unimplemented final : public grpc::ServerGenericBidiReactor {
 public:
  Unimplemented() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
  void OnDone() override { delete this; }
};

class EchoService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override {
    const std::string& method = context->method();
    if (method == kUnary) return new UnaryEcho;
    if (method == kStream) return new StreamEcho;
    return new Unimplemented;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: cpp-echo-server PORT [HOST]\n");
    return 2;
  }
  const std::string host = argc == 3 ? argv[2] : "127.0.0.1";
  const std::string address = host + ":" + argv[1];

  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "cpp-echo-server: cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("listening on %d\n", port);
  std::fflush(stdout);
  server->Wait();
  return 0;
}
