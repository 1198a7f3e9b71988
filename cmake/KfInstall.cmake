# install() rules: `cmake --install build --prefix DIR` gives a kf that runs from any directory, with the
# source and build trees gone (kf finds everything relative to itself, src/core/resources.cc):
#   DIR/bin/kf
#   DIR/share/kernelfoundry/python-task/kernelfoundry/  task side of the Python package (+ _measure), the only
#                                                     Python directory of a candidate's processes
#   DIR/share/kernelfoundry/python/kernelfoundry/       host side (+ _contain, eval_pipeline/_core): zygote, PCH
#                                                     builder, Python API (python/README.md)
#   DIR/share/kernelfoundry/sdk/{include,src,lib}/  task SDK of native test programs (headers, timing loop sources
#                                                  and lib/kf_task_sdk.o, those sources compiled)
#   DIR/share/kernelfoundry/examples/               example tasks and candidates
#   DIR/share/doc/kernelfoundry/                    README, docs/
# Included from the top-level CMakeLists.txt after the targets exist.

install(TARGETS kf RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")

# The Python package, both sides. When the build tree holds an assembled side (${build}/python-task/kernelfoundry,
# ${build}/python/kernelfoundry: the sources plus the compiled modules, made by python/CMakeLists.txt) that is
# installed; otherwise the side's sources (plus _measure for the task side). Decided at install time, when the
# build has run.
set(kf_py_measure "")
if(TARGET _measure)
  set(kf_py_measure "$<TARGET_FILE:_measure>")
endif()
foreach(kf_side IN ITEMS "python-task;task" "python;host")
  list(GET kf_side 0 kf_side_dir)
  list(GET kf_side 1 kf_side_src)
  set(kf_side_measure "")
  if(kf_side_src STREQUAL "task")
    set(kf_side_measure "${kf_py_measure}")
  endif()
  install(CODE "
    set(kf_build_pkg \"${PROJECT_BINARY_DIR}/${kf_side_dir}/kernelfoundry\")
    set(kf_dest \"\${CMAKE_INSTALL_PREFIX}/${KF_INSTALL_DATADIR}/${kf_side_dir}\")
    if(EXISTS \"\${kf_build_pkg}/__init__.py\")
      file(INSTALL DESTINATION \"\${kf_dest}\" TYPE DIRECTORY FILES \"\${kf_build_pkg}\"
           PATTERN __pycache__ EXCLUDE PATTERN *.pyc EXCLUDE)
    else()
      file(INSTALL DESTINATION \"\${kf_dest}\" TYPE DIRECTORY FILES \"${PROJECT_SOURCE_DIR}/python/${kf_side_src}/kernelfoundry\"
           PATTERN __pycache__ EXCLUDE PATTERN *.pyc EXCLUDE PATTERN *.so EXCLUDE)
      if(NOT \"${kf_side_measure}\" STREQUAL \"\")
        file(INSTALL DESTINATION \"\${kf_dest}/kernelfoundry\" TYPE MODULE FILES \"${kf_side_measure}\")
      endif()
    endif()
  ")
endforeach()

# The task SDK: the headers it owns and everything they and its sources include (cmake/KfModules.cmake),
# and the sources, each under its path below include/ or src/.
kf_sdk_headers(kf_sdk_header_list "${PROJECT_SOURCE_DIR}")
foreach(h IN LISTS kf_sdk_header_list)
  get_filename_component(dir "${h}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/include/${h}" DESTINATION "${KF_INSTALL_DATADIR}/sdk/include/${dir}")
endforeach()
foreach(s IN LISTS KF_MODULE_sdk_SOURCES)
  get_filename_component(dir "${s}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/src/${s}" DESTINATION "${KF_INSTALL_DATADIR}/sdk/src/${dir}")
endforeach()
if(KF_TASK_SDK_OBJECT)  # the SDK compiled once (CMakeLists.txt); installed after the sources, so it is newer
  install(FILES "${KF_TASK_SDK_OBJECT}" DESTINATION "${KF_INSTALL_DATADIR}/sdk/lib")
endif()

install(DIRECTORY "${PROJECT_SOURCE_DIR}/examples/" DESTINATION "${KF_INSTALL_DATADIR}/examples"
        PATTERN __pycache__ EXCLUDE PATTERN *.pyc EXCLUDE PATTERN *.so EXCLUDE PATTERN *.o EXCLUDE)
install(FILES "${PROJECT_SOURCE_DIR}/README.md" DESTINATION "${CMAKE_INSTALL_DOCDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/" DESTINATION "${CMAKE_INSTALL_DOCDIR}")
