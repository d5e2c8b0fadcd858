# find_package(flashsampling): the imported target flashsampling::flashsampling
# (libflashsampling and its header flashsampling.h).
include("${CMAKE_CURRENT_LIST_DIR}/flashsamplingTargets.cmake")
