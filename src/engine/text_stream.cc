// TextStream: detokenize, hold back possible stop strings, flush at the end.
#include "engine/text_stream.h"

namespace shoal {

std::string OpenAiFinishName(FinishReason r) {
  switch (r) {
    case FinishReason::kEos:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "";
}

TextStream::TextStream(const Tokenizer& tokenizer, const SamplingParams& params,
                       std::vector<int32_t> eog, bool replace_invalid)
    : detok_(tokenizer, /*special=*/false, replace_invalid), stop_(params, std::move(eog)) {}

TextUpdate TextStream::Push(int32_t token, FinishReason finish) {
  TextUpdate out;
  StopUpdate u = stop_.Add(token, detok_.Push(token));
  out.text = std::move(u.emit);
  if (u.reason != StopReason::kNone) {
    out.finish = std::string(StopReasonName(u.reason));
    return out;
  }
  if (finish != FinishReason::kNone) {
    // The last token: what the detokenizer still holds goes through the stop strings too, then
    // whatever they held back is final.
    out.text += stop_.AddText(detok_.Flush()).emit;
    if (!stop_.stopped()) out.text += stop_.Flush();
    out.finish =
        stop_.stopped() ? std::string(StopReasonName(stop_.reason())) : OpenAiFinishName(finish);
  }
  return out;
}

}  // namespace shoal
