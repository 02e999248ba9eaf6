// io/output_parts: the part names of a parted output (OUT.part-<8 hex>-<4 digits>) and nothing
// else, the main file's record of its parts (its user block) read back exactly and refused when
// it is anything else, a generation no file of the folder uses, and the removal of a replaced
// output's parts: its own regular files only, never links, other generations or other outputs'.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "io/output_parts.hpp"

namespace blockmm::io {
namespace {

TEST(OutputParts, NamesFollowTheirOutputExactly) {
  EXPECT_EQ(part_name("C.h5", "0a1b2c3d", 7), "C.h5.part-0a1b2c3d-0007");
  std::string generation;
  int index = -1;
  EXPECT_TRUE(is_part_name_of("C.h5", "C.h5.part-0a1b2c3d-4095", &generation, &index));
  EXPECT_EQ(generation, "0a1b2c3d");
  EXPECT_EQ(index, 4095);
  for (const char* other : {"C.h5.part-0a1b2c3d-4096", "D.h5.part-0a1b2c3d-0000", "C.h5.part-0A1B2C3D-0000",
                            "C.h5.part-0a1b2c3-0000", "C.h5.part-0a1b2c3d-000", "C.h5.part-0a1b2c3d-00000",
                            "../C.h5.part-0a1b2c3d-0000", "C.h5.part-0a1b2c3d-0000/", "C.h5.part-0a1b2c3d_0000",
                            "xC.h5.part-0a1b2c3d-0000", "C.h5.part-0a1b2c3d-+001", "", "C.h5"})
    EXPECT_FALSE(is_part_name_of("C.h5", other)) << other;
  EXPECT_FALSE(is_part_name_of("", ".part-0a1b2c3d-0000"));
}

TEST(OutputParts, TheRecordReadsBackAndNothingElseReadsAsOne) {
  const std::string block = parts_user_block("00ff00ff", 12);
  ASSERT_EQ(block.size(), static_cast<std::size_t>(kPartsUserBlockBytes));
  const auto record = parse_parts_user_block(block);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->generation, "00ff00ff");
  EXPECT_EQ(record->parts, 12);
  for (const std::string& bad :
       {std::string("\x89HDF\r\n\x1a\n", 8), std::string("blockmm-parts generation=00ff00ff parts=0\n"),
        std::string("blockmm-parts generation=00ff00ff parts=4097\n"), std::string("blockmm-parts generation=00FF00ff parts=2\n"),
        std::string("blockmm-parts generation=00ff00ff parts=2"), std::string("blockmm-parts generation=00ff00ff parts=-2\n"),
        std::string("blockmm-parts generation=00ff00ff  parts=2\n"), std::string("")})
    EXPECT_FALSE(parse_parts_user_block(bad).has_value()) << bad;
}

class Folder : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/blockmm-parts-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override { std::system(("rm -rf '" + dir + "'").c_str()); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir + "/" + name) << text; }
  bool exists(const std::string& name) const {
    struct stat st {};
    return ::lstat((dir + "/" + name).c_str(), &st) == 0;
  }
  std::string dir;
};

TEST_F(Folder, ReplacedPartsAreExactlyTheRecordsRegularFiles) {
  write("C.h5", parts_user_block("11112222", 3));
  for (int k = 0; k < 3; ++k) write(part_name("C.h5", "11112222", k), "part");
  write(part_name("C.h5", "11112222", 3), "beyond the record: not its part");
  write(part_name("C.h5", "33334444", 0), "another generation");
  write(part_name("D.h5", "11112222", 0), "another output");
  ASSERT_EQ(::unlink((dir + "/" + part_name("C.h5", "11112222", 2)).c_str()), 0);
  ASSERT_EQ(::symlink("elsewhere", (dir + "/" + part_name("C.h5", "11112222", 2)).c_str()), 0);
  const std::vector<std::string> named = parts_of_existing_output(dir + "/C.h5");
  ASSERT_EQ(named.size(), 3u);
  EXPECT_EQ(named[1], part_name("C.h5", "11112222", 1));
  // The new output's own generation is never removed, whatever the record says.
  const std::vector<std::string> removed = remove_replaced_parts(dir + "/C.h5", named, "11112222");
  EXPECT_TRUE(removed.empty());
  const std::vector<std::string> now = remove_replaced_parts(dir + "/C.h5", named, "ffffffff");
  EXPECT_EQ(now, (std::vector<std::string>{part_name("C.h5", "11112222", 0), part_name("C.h5", "11112222", 1)}));
  EXPECT_TRUE(exists(part_name("C.h5", "11112222", 2))) << "a link named as a part was removed";
  EXPECT_TRUE(exists(part_name("C.h5", "11112222", 3)));
  EXPECT_TRUE(exists(part_name("C.h5", "33334444", 0)));
  EXPECT_TRUE(exists(part_name("D.h5", "11112222", 0)));
  // Names that are not the output's parts are never touched, even when passed in.
  write("victim", "x");
  EXPECT_TRUE(remove_replaced_parts(dir + "/C.h5", {"victim", "../victim", "C.h5"}, "").empty());
  EXPECT_TRUE(exists("victim"));
  EXPECT_TRUE(exists("C.h5"));
  // A target that is a link is not read through; one without a record names nothing.
  ASSERT_EQ(::symlink("C.h5", (dir + "/L.h5").c_str()), 0);
  EXPECT_TRUE(parts_of_existing_output(dir + "/L.h5").empty());
  write("E.h5", "not a parted output");
  EXPECT_TRUE(parts_of_existing_output(dir + "/E.h5").empty());
}

TEST_F(Folder, AFreshGenerationIsOneNoFileUses) {
  for (int round = 0; round < 20; ++round) {
    const std::string generation = fresh_part_generation(dir + "/C.h5");
    ASSERT_EQ(generation.size(), 8u);
    EXPECT_FALSE(exists(part_name("C.h5", generation, 0)));
    write(part_name("C.h5", generation, 0), "taken");
    write("." + part_name("C.h5", generation, 1) + ".blockmm-tmp.host.1.abcdef", "a temporary");
  }
  EXPECT_GT(longest_parted_base("host"), 150u);
}

}  // namespace
}  // namespace blockmm::io
