# cmake -DNPM=... -DNPM_DIR=... -DOUT=... -P install_chart_library.cmake
# Installs the dashboard's chart library (uPlot) from the npm registry into NPM_DIR (where
# package.json and package-lock.json were copied) and copies its two files into OUT. A
# registry that cannot be reached is a warning, not a failed build: the page then says its
# charts are missing and shows everything else.
execute_process(
  COMMAND ${NPM} ci --prefix ${NPM_DIR} --no-audit --no-fund --ignore-scripts --loglevel=error
  RESULT_VARIABLE npm_result)
if(NOT npm_result EQUAL 0)
  message(WARNING "npm ci failed (${npm_result}): the dashboard will have no charts")
  return()
endif()
file(COPY ${NPM_DIR}/node_modules/uplot/dist/uPlot.iife.min.js ${NPM_DIR}/node_modules/uplot/dist/uPlot.min.css
  DESTINATION ${OUT})
