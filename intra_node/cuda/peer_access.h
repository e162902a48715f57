// What this process's GPU can reach directly. Host-only; no MPI.
#pragma once

#include <string>
#include <vector>

namespace gradagg::nvlink {

// The current device's PCI bus id ("0000:1B:00.0"): how ranks that see different device numbers name one GPU.
std::string CurrentDevicePciBusId();

// For each GPU named by its PCI bus id: whether the current device has direct peer access to it (itself: true;
// a GPU this process cannot see: false).
std::vector<bool> PeerAccessRow(const std::vector<std::string>& pciBusIds);

// For each GPU named by its PCI bus id: whether the current device reaches it with native atomics, as NVLink does and
// PCIe peer-to-peer does not (itself: true; a GPU this process cannot see or reach: false).
std::vector<bool> NativeAtomicsRow(const std::vector<std::string>& pciBusIds);

}  // namespace gradagg::nvlink
