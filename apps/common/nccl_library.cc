#include "apps/common/nccl_library.h"

#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <stdexcept>

namespace gradagg {

struct NcclLibrary::Api {
  decltype(&ncclGetVersion) getVersion;
  decltype(&ncclGetUniqueId) getUniqueId;
  decltype(&ncclCommInitRank) commInitRank;
  decltype(&ncclCommDestroy) commDestroy;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclGetErrorString) errorString;
  // NCCL 2.27 and later: symmetric windows (null where the library lacks them).
  decltype(&ncclMemAlloc) memAlloc = nullptr;
  decltype(&ncclMemFree) memFree = nullptr;
  decltype(&ncclCommWindowRegister) windowRegister = nullptr;
  decltype(&ncclCommWindowDeregister) windowDeregister = nullptr;
};

namespace {
template <typename Function>
bool Resolve(void* handle, const char* name, Function& function, std::string& why) {
  function = reinterpret_cast<Function>(dlsym(handle, name));
  if (function == nullptr) why = std::string("libnccl.so.2 has no ") + name;
  return function != nullptr;
}
}  // namespace

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes, "NCCL's unique id changed size");

bool NcclLibrary::Load(std::string& why) {
  handle_ = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    why = std::string("cannot load libnccl.so.2: ") + dlerror();
    return false;
  }
  api_ = std::make_unique<Api>();
  if (!Resolve(handle_, "ncclGetVersion", api_->getVersion, why) ||
      !Resolve(handle_, "ncclGetUniqueId", api_->getUniqueId, why) ||
      !Resolve(handle_, "ncclCommInitRank", api_->commInitRank, why) ||
      !Resolve(handle_, "ncclCommDestroy", api_->commDestroy, why) ||
      !Resolve(handle_, "ncclAllReduce", api_->allReduce, why) ||
      !Resolve(handle_, "ncclGetErrorString", api_->errorString, why))
    return false;
  int version = 0;
  api_->getVersion(&version);
  version_ = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
             std::to_string(version % 100);
  return true;
}

bool NcclLibrary::UniqueId(char* id, size_t bytes, std::string& why) {
  ncclUniqueId unique{};
  const ncclResult_t result = api_->getUniqueId(&unique);
  if (result != ncclSuccess) {
    why = std::string("ncclGetUniqueId: ") + api_->errorString(result);
    return false;
  }
  std::memcpy(id, &unique, bytes);
  return true;
}

bool NcclLibrary::Join(int rank, int ranks, const char* id, std::string& why) {
  ncclUniqueId unique{};
  std::memcpy(&unique, id, sizeof(unique));
  ncclComm_t comm = nullptr;
  const ncclResult_t result = api_->commInitRank(&comm, ranks, unique, rank);
  if (result != ncclSuccess) {
    why = std::string("ncclCommInitRank: ") + api_->errorString(result);
    return false;
  }
  comm_ = comm;
  return true;
}

NcclLibrary::NcclLibrary() = default;

bool NcclLibrary::AllocateSymmetric(size_t bytes, std::string& why) {
  if (!Resolve(handle_, "ncclMemAlloc", api_->memAlloc, why) || !Resolve(handle_, "ncclMemFree", api_->memFree, why) ||
      !Resolve(handle_, "ncclCommWindowRegister", api_->windowRegister, why) ||
      !Resolve(handle_, "ncclCommWindowDeregister", api_->windowDeregister, why))
    return false;
  const auto check = [this](ncclResult_t result, const char* call) {
    if (result != ncclSuccess) throw std::runtime_error(std::string(call) + ": " + api_->errorString(result));
  };
  for (int i = 0; i < 2; ++i) {
    check(api_->memAlloc(&symmetric_[i], bytes), "ncclMemAlloc");
    ncclWindow_t window = nullptr;
    check(api_->windowRegister(static_cast<ncclComm_t>(comm_), symmetric_[i], bytes, &window, NCCL_WIN_COLL_SYMMETRIC),
          "ncclCommWindowRegister");
    windows_[i] = window;
  }
  return true;
}

NcclLibrary::~NcclLibrary() {
  // Windows go before their memory, and both before the communicator (collective, like the registration).
  for (int i = 0; i < 2; ++i) {
    if (windows_[i] != nullptr)
      api_->windowDeregister(static_cast<ncclComm_t>(comm_), static_cast<ncclWindow_t>(windows_[i]));
    if (symmetric_[i] != nullptr) api_->memFree(symmetric_[i]);
  }
  if (comm_ != nullptr) api_->commDestroy(static_cast<ncclComm_t>(comm_));
  // The library stays loaded: NCCL's own threads may outlive the communicator briefly.
}

void NcclLibrary::AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  const ncclDataType_t dataType = type == ElementType::kBFloat16 ? ncclBfloat16
                                  : type == ElementType::kFloat16 ? ncclFloat16
                                                                  : ncclFloat32;
  const ncclResult_t result =
      api_->allReduce(input, output, count, dataType, ncclSum, static_cast<ncclComm_t>(comm_), stream);
  if (result != ncclSuccess) throw std::runtime_error(std::string("ncclAllReduce: ") + api_->errorString(result));
}

}  // namespace gradagg
