# cmake -DNPM=... -DNPM_DIR=... -DWHAT=... [-DCOPY=FILE,... -DOUT=DIR] [-DSTAMP=FILE] -P npm_ci.cmake
# Installs the npm packages of NPM_DIR (where package.json and package-lock.json were copied)
# from the registry, into the build tree, never the source tree. Then copies the files COPY
# names (relative to NPM_DIR/node_modules) into OUT, and touches STAMP. Used by the dashboard
# (its chart library, tools/CMakeLists.txt) and the manifest checks (tests/deploy). A registry
# that cannot be reached is a warning naming WHAT goes without, not a failed build.
execute_process(
  COMMAND ${NPM} ci --prefix ${NPM_DIR} --no-audit --no-fund --ignore-scripts --loglevel=error
  RESULT_VARIABLE npm_result)
if(NOT npm_result EQUAL 0)
  message(WARNING "npm ci failed (${npm_result}): ${WHAT}")
  return()
endif()
string(REPLACE "," ";" COPY "${COPY}")
foreach(file IN LISTS COPY)
  file(COPY ${NPM_DIR}/node_modules/${file} DESTINATION ${OUT})
endforeach()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
