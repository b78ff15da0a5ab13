// The lenient ai006 reader, what `attncheck solve --problem ai006` reads. Properties: see
// check_lenient_reader (round trip through write_instance, positioned errors, finite output).
#include "reader_properties.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attn::fuzz::check_lenient_reader(data, size, attn::Problem::ai006);
  return 0;
}
