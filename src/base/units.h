// Byte-size units shared by every size flag and file setting ("256M", "2GiB", "4096").
#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace shoal {

// Bytes per unit for "", B, K/KB/KiB, M/MB/MiB, G/GB/GiB (any case; binary multiples, as
// llama.cpp and vLLM read memory sizes), or nullopt for anything else.
inline std::optional<double> ByteUnitMultiplier(std::string_view unit) {
  std::string u(unit);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u.empty() || u == "B") return 1.0;
  if (u == "K" || u == "KB" || u == "KIB") return 1024.0;
  if (u == "M" || u == "MB" || u == "MIB") return 1024.0 * 1024;
  if (u == "G" || u == "GB" || u == "GIB") return 1024.0 * 1024 * 1024;
  return std::nullopt;
}

}  // namespace shoal
