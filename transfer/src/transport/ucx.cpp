// ucx.cpp — see ucx.h.
#include "transport/ucx.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

namespace splitzip {
namespace transfer {

std::string ucs_text(ucs_status_t status) { return ucs_status_string(status); }

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ep_err_cb(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<Ucx*>(arg)->on_ep_error(status); }

void send_cb(void*, ucs_status_t status, void* user_data) {
  Op* op = static_cast<Op*>(user_data);
  op->status = status;
  op->done = true;
}

void recv_cb(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  Op* op = static_cast<Op*>(user_data);
  op->status = status;
  if (info != nullptr && status == UCS_OK) {
    op->length = info->length;
    op->sender_tag = info->sender_tag;
  }
  op->done = true;
}

}  // namespace

Ucx::~Ucx() {
  if (ep_ != nullptr) close_ep(false, 1.0);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

sz_status Ucx::init(const std::string& net_device, std::string* error) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) {
    *error = "UCX configuration: " + ucs_text(st);
    return SZ_ERROR_IO;
  }
  if (!net_device.empty()) {
    st = ucp_config_modify(config, "NET_DEVICES", net_device.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      *error = "UCX configuration (network device " + net_device + "): " + ucs_text(st);
      return SZ_ERROR_IO;
    }
  }
  ucp_params_t params;
  memset(&params, 0, sizeof params);
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    *error = "UCX init: " + ucs_text(st);
    return SZ_ERROR_IO;
  }
  {
    ucp_context_attr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    cuda_memory_ = ucp_context_query(context_, &attr) == UCS_OK &&
                   (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }
  ucp_worker_params_t wp;
  memset(&wp, 0, sizeof wp);
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    *error = "UCX worker: " + ucs_text(st);
    return SZ_ERROR_IO;
  }
  st = ucp_worker_get_efd(worker_, &ucx_fd_);
  if (st != UCS_OK) {
    *error = "UCX worker event fd: " + ucs_text(st);
    return SZ_ERROR_IO;
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    *error = std::string("eventfd: ") + strerror(errno);
    return SZ_ERROR_IO;
  }
  return SZ_OK;
}

bool Ucx::cuda_memory_supported() {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
  ucp_params_t params;
  memset(&params, 0, sizeof params);
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  const ucs_status_t st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) return false;
  ucp_context_attr_t attr;
  memset(&attr, 0, sizeof attr);
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  const bool yes = ucp_context_query(context, &attr) == UCS_OK &&
                   (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  ucp_cleanup(context);
  return yes;
}

sz_status Ucx::address(std::vector<uint8_t>* out, std::string* error) {
  ucp_address_t* a = nullptr;
  size_t len = 0;
  const ucs_status_t st = ucp_worker_get_address(worker_, &a, &len);
  if (st != UCS_OK) {
    *error = "UCX worker address: " + ucs_text(st);
    return SZ_ERROR_IO;
  }
  out->assign(reinterpret_cast<const uint8_t*>(a), reinterpret_cast<const uint8_t*>(a) + len);
  ucp_worker_release_address(worker_, a);
  return SZ_OK;
}

sz_status Ucx::connect(const std::vector<uint8_t>& peer_address, std::string* error) {
  if (peer_address.empty()) {
    *error = "empty peer address";
    return SZ_ERROR_INVALID_ARGUMENT;
  }
  ucp_ep_params_t ep;
  memset(&ep, 0, sizeof ep);
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = ep_err_cb;
  ep.err_handler.arg = this;
  const ucs_status_t st = ucp_ep_create(worker_, &ep, &ep_);
  if (st != UCS_OK) {
    ep_ = nullptr;
    *error = "cannot create a UCX endpoint to the receiver: " + ucs_text(st);
    return SZ_ERROR_IO;
  }
  ep_failed_ = false;
  ep_status_ = UCS_OK;
  return SZ_OK;
}

void Ucx::on_ep_error(ucs_status_t status) {
  ep_failed_ = true;
  ep_status_ = status;
}

// The operation op after posting it (r: what ucp_tag_*_nbx returned): failed, in flight, or, for r == nullptr,
// completed at once with status `immediate`.
static sz_status posted(ucs_status_ptr_t r, Op* op, ucs_status_t immediate) {
  if (UCS_PTR_IS_ERR(r)) {
    op->status = UCS_PTR_STATUS(r);
    return SZ_ERROR_IO;
  }
  op->active = true;
  if (r == nullptr) {
    op->done = true;
    op->status = immediate;
  } else {
    op->request = r;
  }
  return SZ_OK;
}

// The parameters of a tagged send or receive completing through a callback on op, with no immediate completion,
// for device memory when `device`.
static ucp_request_param_t op_params(Op* op, bool device) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (device) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.memory_type = UCS_MEMORY_TYPE_CUDA;
  }
  p.user_data = op;
  return p;
}

sz_status Ucx::send(uint64_t tag, const void* a, size_t a_size, const void* b, size_t b_size, Op* op, bool device) {
  if (ep_ == nullptr || ep_failed_) return SZ_ERROR_IO;
  if (device && (!cuda_memory_ || b_size != 0)) return SZ_ERROR_INVALID_ARGUMENT;
  *op = Op();
  ucp_request_param_t p = op_params(op, device);
  p.cb.send = send_cb;
  ucs_status_ptr_t r;
  if (b_size == 0) {
    r = ucp_tag_send_nbx(ep_, a, a_size, tag, &p);
  } else {
    op->iov[0].buffer = const_cast<void*>(a);
    op->iov[0].length = a_size;
    op->iov[1].buffer = const_cast<void*>(b);
    op->iov[1].length = b_size;
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_iov();
    r = ucp_tag_send_nbx(ep_, op->iov, 2, tag, &p);
  }
  return posted(r, op, UCS_OK);
}

sz_status Ucx::recv(uint64_t tag, uint64_t mask, void* buffer, size_t capacity, Op* op, bool device) {
  if (device && !cuda_memory_) return SZ_ERROR_INVALID_ARGUMENT;
  *op = Op();
  ucp_request_param_t p = op_params(op, device);
  p.cb.recv = recv_cb;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, buffer, capacity, tag, mask, &p);
  // An immediate completion is not expected with NO_IMM_CMPL: taken as one of unknown length, which the caller
  // rejects.
  return posted(r, op, UCS_ERR_NO_MESSAGE);
}

ucs_status_t Ucx::reap(Op* op) {
  if (op->request != nullptr) ucp_request_free(op->request);
  op->request = nullptr;
  op->active = false;
  return op->status;
}

void Ucx::cancel(Op* op) {
  if (!op->active) return;
  if (!op->done && op->request != nullptr) {
    ucp_request_cancel(worker_, op->request);
    const double deadline = now_s() + 2.0;
    while (!op->done && now_s() < deadline) {
      if (!ucp_worker_progress(worker_)) usleep(100);
    }
  }
  if (op->done) {
    reap(op);
  } else {
    // The request would not finish: leave it to UCX (freed on completion); its buffer must outlive the worker,
    // which the owners guarantee by destroying the worker before their buffers.
    ucp_request_free(op->request);
    op->request = nullptr;
    op->active = false;
  }
}

bool Ucx::progress() {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

void Ucx::wait(double max_seconds) {
  if (ucp_worker_progress(worker_) != 0) return;
  const ucs_status_t st = ucp_worker_arm(worker_);
  if (st == UCS_ERR_BUSY) return;
  pollfd fds[3];
  fds[0].fd = ucx_fd_;
  fds[0].events = POLLIN;
  fds[1].fd = wake_fd_;
  fds[1].events = POLLIN;
  fds[2].fd = watch_fd_;  // negative: ignored by poll
  fds[2].events = POLLIN;
  if (max_seconds < 0) max_seconds = 0;
  timespec ts;
  ts.tv_sec = (time_t)max_seconds;
  ts.tv_nsec = (long)((max_seconds - (double)ts.tv_sec) * 1e9);
  ppoll(fds, 3, &ts, nullptr);
  uint64_t v;
  while (read(wake_fd_, &v, sizeof v) == (ssize_t)sizeof v) {
  }
}

void Ucx::wake() {
  const uint64_t one = 1;
  ssize_t r = write(wake_fd_, &one, sizeof one);
  (void)r;
}

void Ucx::close_ep(bool flush, double timeout_s) {
  if (ep_ == nullptr) return;
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = (flush && !ep_failed_) ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
  ep_ = nullptr;
  if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
    const double deadline = now_s() + timeout_s;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && now_s() < deadline) {
      if (!ucp_worker_progress(worker_)) usleep(100);
    }
    ucp_request_free(r);
  }
}

}  // namespace transfer
}  // namespace splitzip
