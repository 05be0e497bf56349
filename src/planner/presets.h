// Presets for `shoal plan` / `shoal sim`: devices (memory, bandwidth, flops, link, power, price)
// and models (published hyper-parameters turned into a tensor table), sources in docs/SCALE.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "measure/node_info.h"
#include "planner/model_profile.h"

namespace shoal::planner {

struct DevicePreset {
  std::string name;
  std::string description;
  measure::NodeInfo node;  // mem_limit = memory a shoal node may use; speeds; link to the next node
  double power_w = 0;      // typical draw under load, watts (0 = unknown)
  double price_usd = 0;    // purchase price of one device, dollars (0 = unknown)
  double peak_flops = 0;   // the headline number (for the seed check), flops/s
  uint64_t mem_total = 0;  // installed memory, bytes (mem_limit is the usable part)
};

// Names of the device presets (without "local", which the CLI measures).
std::vector<std::string_view> DevicePresetNames();
Result<DevicePreset> FindDevicePreset(std::string_view name);
// Link presets for --link: bandwidth (bytes/s) and one-way latency (s).
struct LinkPreset {
  std::string_view name;
  double bw = 0, latency_s = 0;
};
std::vector<LinkPreset> LinkPresets();
Result<LinkPreset> FindLinkPreset(std::string_view name);

// A device from a measure::NodeInfo JSON file with optional "power_w" and "price_usd" keys.
Result<DevicePreset> DeviceFromJson(const std::string& json, const std::string& name);

std::vector<std::string_view> ModelPresetNames();
// The profile of a preset with its matrices in `type` (nullopt: the preset's own mix; kimi-k3
// keeps its routed experts in MXFP4). Norms and the router stay F32.
Result<ModelProfile> ModelPresetProfile(std::string_view name, std::optional<DType> type);

}  // namespace shoal::planner
