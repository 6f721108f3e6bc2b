# Fails unless the text of every file in FILES appears verbatim in DOC.
# Usage: cmake -DDOC=doc.md -DFILES="a.c;b.cpp" -P CheckDocListings.cmake
file(READ "${DOC}" doc)
foreach(f ${FILES})
  file(READ "${f}" text)
  string(FIND "${doc}" "${text}" at)
  if(at EQUAL -1)
    get_filename_component(name "${f}" NAME)
    message(FATAL_ERROR "${DOC} does not quote ${name} verbatim; copy the file into its listing")
  endif()
endforeach()
