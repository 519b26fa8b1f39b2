// transfer_ext.cpp — the glue between the transfer library (transfer/include/splitzip/transfer.hpp) and the Python
// package (splitzip/transfer.py): the submodule _splitzip.transfer, compiled in when the transfer library is built.
//
// Tensors cross as flat C-contiguous uint8 host arrays that the Python layer made (and keeps alive during a send).
// send() and Server.serve_one() release the GIL for their whole run; a ReadyGate is marked from any thread. A
// server's destination is a Python callable that the session threads call with the GIL taken; the arrays it returns
// stay referenced here until the library releases them (ServeOptions::release), so a session never writes into
// freed memory; an optional Python release callable then gets each array back, with whether every byte of its tensor
// verified. Server.close() releases the GIL while it ends the sessions that may still call back. The server
// takes part in Python's garbage collection (its callable may refer back to it). Statuses come back as ints, with the
// library's message; the Python layer raises.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "splitzip/transfer.hpp"

namespace nb = nanobind;
namespace tr = splitzip::transfer;

namespace {

using HostBytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using HostBytesOut = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

nb::dict send_stats_dict(const tr::SendStats& s) {
  nb::dict d;
  d["raw_bytes"] = s.raw_bytes;
  d["payload_bytes"] = s.payload_bytes;
  d["wire_bytes"] = s.wire_bytes;
  d["messages"] = s.messages;
  d["seconds"] = s.seconds;
  d["handshake_seconds"] = s.handshake_seconds;
  d["codec_seconds"] = s.codec_seconds;
  return d;
}

nb::dict session_stats_dict(const tr::SessionStats& s) {
  nb::dict d;
  d["raw"] = s.raw;
  d["raw_bytes"] = s.raw_bytes;
  d["wire_bytes"] = s.wire_bytes;
  d["messages"] = s.messages;
  d["seconds"] = s.seconds;
  d["codec_seconds"] = s.codec_seconds;
  d["buffer_bytes"] = s.buffer_bytes;
  nb::list tensors;
  for (const auto& t : s.tensors) {
    nb::dict e;
    e["name"] = t.name;
    e["dtype"] = static_cast<int>(t.dtype);
    e["size"] = t.size;
    e["path"] = t.path;
    e["in_destination"] = t.data != nullptr;
    tensors.append(e);
  }
  d["tensors"] = tensors;
  return d;
}

// tensors: (name, dtype id, flat uint8 host array) each.
std::tuple<int, std::string, nb::dict> send(const std::string& host, uint16_t port,
                                            const std::vector<std::tuple<std::string, int, HostBytes>>& tensors,
                                            bool raw, double rate_bytes_per_s, unsigned threads,
                                            const std::string& token, uint64_t chunk_values, unsigned window,
                                            double timeout_s, tr::ReadyGate* gate) {
  std::vector<tr::Tensor> ts;
  ts.reserve(tensors.size());
  for (const auto& t : tensors) {
    tr::Tensor x;
    x.name = std::get<0>(t);
    x.dtype = static_cast<sz_dtype>(std::get<1>(t));
    x.data = std::get<2>(t).data();
    x.size = std::get<2>(t).shape(0);
    ts.push_back(std::move(x));
  }
  tr::SendOptions o;
  o.raw = raw;
  o.rate_bytes_per_s = rate_bytes_per_s;
  o.threads = threads;
  o.token = token;
  o.chunk_values = chunk_values;
  o.window = window;
  o.timeout_s = timeout_s;
  o.gate = gate;
  tr::SendStats stats;
  std::string error;
  sz_status st;
  {
    nb::gil_scoped_release release;
    st = tr::send(host, port, ts, o, &stats, &error);
  }
  return {static_cast<int>(st), error, send_stats_dict(stats)};
}

// A receiver whose tensors go to a Python destination callable, to out_dir, or nowhere (discard).
class PyServer {
 public:
  friend int server_traverse(PyObject* self, visitproc visit, void* arg);
  friend int server_clear(PyObject* self);

  ~PyServer() { close(); }

  std::tuple<int, std::string> open(const std::string& address, uint16_t port, nb::object destination,
                                    nb::object release, const std::string& out_dir, bool discard, bool overwrite,
                                    unsigned threads, double timeout_s, double accept_timeout_s,
                                    const std::string& token, uint32_t max_sessions, uint64_t max_tensor_bytes,
                                    uint64_t max_session_bytes, uint64_t max_server_bytes) {
    tr::ServeOptions so;
    so.address = address;
    so.port = port;
    so.out_dir = out_dir;
    so.discard = discard;
    so.overwrite = overwrite;
    so.threads = threads;
    so.timeout_s = timeout_s;
    so.accept_timeout_s = accept_timeout_s;
    so.token = token;
    so.max_sessions = max_sessions;
    so.max_tensor_bytes = max_tensor_bytes;
    so.max_session_bytes = max_session_bytes;
    so.max_server_bytes = max_server_bytes;
    if (!destination.is_none()) {
      destination_ = destination;
      release_ = release;
      so.destination = [this](const std::string& name, sz_dtype dtype, uint64_t size) {
        return this->destination(name, dtype, size);
      };
      so.release = [this](const std::string& name, void* data, bool complete) {
        this->release(name, data, complete);
      };
    }
    std::string error;
    const sz_status st = server_.open(so, &error);
    return {static_cast<int>(st), error};
  }

  uint16_t port() const { return server_.port(); }

  std::tuple<int, std::string, nb::dict> serve_one() {
    tr::SessionStats stats;
    std::string error;
    sz_status st;
    {
      nb::gil_scoped_release release;
      st = server_.serve_one(&stats, &error);
    }
    return {static_cast<int>(st), error, session_stats_dict(stats)};
  }

  void stop() { server_.stop(); }

  // Ends every session (they may call back into Python, so without the GIL) and drops what they held.
  void close() {
    {
      nb::gil_scoped_release release;
      server_.close();
    }
    std::lock_guard<std::mutex> lock(mu_);
    held_.clear();
    destination_ = nb::none();
    release_ = nb::none();
  }

 private:
  // On a session thread: the callable's array for this tensor, held until released; NULL refuses the tensor.
  void* destination(const std::string& name, sz_dtype dtype, uint64_t size) {
    nb::gil_scoped_acquire gil;
    try {
      nb::object fn = destination_;  // our own reference for the call: the collector may clear destination_
      if (fn.is_none()) return nullptr;
      nb::object got = fn(name, static_cast<int>(dtype), size);
      if (got.is_none()) return nullptr;
      HostBytesOut a = nb::cast<HostBytesOut>(got);
      if (a.shape(0) < size) return nullptr;
      std::lock_guard<std::mutex> lock(mu_);
      held_.emplace(a.data(), got);
      return a.data();
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("splitzip.transfer.Server destination");
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
      PyErr_WriteUnraisable(nullptr);
    }
    return nullptr;
  }

  // On a session thread, once the session will write no more to `data`: drops our reference to its array, after
  // handing it to the release callable (if any) with whether the tensor verified completely.
  void release(const std::string& name, void* data, bool complete) {
    nb::gil_scoped_acquire gil;
    nb::object array, fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = held_.find(data);
      if (it == held_.end()) return;
      array = std::move(it->second);
      held_.erase(it);
      fn = release_;
    }
    if (fn.is_none()) return;
    try {
      fn(name, array, complete);
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("splitzip.transfer.Server release");
    }
  }

  tr::Server server_;
  nb::object destination_;
  nb::object release_;
  std::mutex mu_;
  std::unordered_multimap<void*, nb::object> held_;
};

// The references a server holds for Python's cycle collector (called with the GIL held, as every change to them is).
int server_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  PyServer* s = nb::inst_ptr<PyServer>(self);
  Py_VISIT(s->destination_.ptr());
  Py_VISIT(s->release_.ptr());
  for (const auto& h : s->held_) Py_VISIT(h.second.ptr());
  return 0;
}

// Breaks a cycle: a session still running then finds no destination and fails.
int server_clear(PyObject* self) {
  PyServer* s = nb::inst_ptr<PyServer>(self);
  s->destination_ = nb::none();
  s->release_ = nb::none();
  return 0;
}

PyType_Slot server_slots[] = {
    {Py_tp_traverse, (void*)server_traverse}, {Py_tp_clear, (void*)server_clear}, {0, nullptr}};

}  // namespace

void register_transfer(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("transfer", "The UCX transfer library (use splitzip.transfer).");
  m.attr("PROTOCOL_VERSION") = tr::kProtocolVersion;

  nb::class_<tr::ReadyGate>(m, "ReadyGate")
      .def(nb::init<size_t>(), nb::arg("n_tensors"))
      .def_prop_ro("size", &tr::ReadyGate::size)
      .def("ready", [](tr::ReadyGate& g, size_t i) { return static_cast<int>(g.ready(i)); }, nb::arg("index"))
      .def("fail", &tr::ReadyGate::fail, nb::arg("why"));

  m.def("send", &send, nb::arg("host"), nb::arg("port"), nb::arg("tensors"), nb::arg("raw"),
        nb::arg("rate_bytes_per_s"), nb::arg("threads"), nb::arg("token"), nb::arg("chunk_values"),
        nb::arg("window"), nb::arg("timeout_s"), nb::arg("gate").none());

  nb::class_<PyServer>(m, "Server", nb::type_slots(server_slots))
      .def(nb::init<>())
      .def("open", &PyServer::open, nb::arg("address"), nb::arg("port"), nb::arg("destination").none(),
           nb::arg("release").none(), nb::arg("out_dir"), nb::arg("discard"), nb::arg("overwrite"),
           nb::arg("threads"), nb::arg("timeout_s"), nb::arg("accept_timeout_s"), nb::arg("token"),
           nb::arg("max_sessions"), nb::arg("max_tensor_bytes"), nb::arg("max_session_bytes"),
           nb::arg("max_server_bytes"))
      .def_prop_ro("port", &PyServer::port)
      .def("serve_one", &PyServer::serve_one)
      .def("stop", &PyServer::stop)
      .def("close", &PyServer::close);
}
