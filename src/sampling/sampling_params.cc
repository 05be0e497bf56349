// SamplingParams validation: turns a bad request into an error message, never a crash.
#include "sampling/sampling_params.h"

#include <cmath>

namespace shoal {

Status SamplingParams::Validate() const {
  if (!std::isfinite(temperature)) return Errorf("temperature must be finite, got {}", temperature);
  if (!(top_p >= 0.0f && top_p <= 1.0f)) return Errorf("top_p must be in [0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Errorf("min_p must be in [0, 1], got {}", min_p);
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty)) {
    return Errorf("repeat_penalty must be a positive number, got {}", repeat_penalty);
  }
  if (!std::isfinite(presence_penalty)) {
    return Errorf("presence_penalty must be finite, got {}", presence_penalty);
  }
  if (!std::isfinite(frequency_penalty)) {
    return Errorf("frequency_penalty must be finite, got {}", frequency_penalty);
  }
  return Status::Ok();
}

}  // namespace shoal
