# Front-end dependencies: LLVM 16 Support and the ANTLR4 tool and runtime.

find_package(LLVM 16 REQUIRED CONFIG PATHS /usr/lib/llvm-16/lib/cmake/llvm
             NO_DEFAULT_PATH)
message(STATUS "Collc: LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")
add_library(coll_llvm INTERFACE)
target_include_directories(coll_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
target_compile_definitions(coll_llvm INTERFACE ${LLVM_DEFINITIONS})
llvm_map_components_to_libnames(COLL_LLVM_LIBS support)
target_link_libraries(coll_llvm INTERFACE ${COLL_LLVM_LIBS})

find_program(ANTLR4_TOOL NAMES antlr4 REQUIRED)
find_path(ANTLR4_INCLUDE_DIR antlr4-runtime.h PATH_SUFFIXES antlr4-runtime REQUIRED)
find_library(ANTLR4_RUNTIME_LIB NAMES antlr4-runtime REQUIRED)
add_library(coll_antlr_runtime INTERFACE)
target_include_directories(coll_antlr_runtime SYSTEM INTERFACE ${ANTLR4_INCLUDE_DIR})
target_link_libraries(coll_antlr_runtime INTERFACE ${ANTLR4_RUNTIME_LIB})

# Lit and FileCheck for tests/lit.
set(LLVM_TOOLS_DIR /usr/lib/llvm-16/bin)
find_program(LIT_PY lit.py PATHS /usr/lib/llvm-16/build/utils/lit NO_DEFAULT_PATH)
find_program(FILECHECK_EXE FileCheck PATHS ${LLVM_TOOLS_DIR} NO_DEFAULT_PATH)
