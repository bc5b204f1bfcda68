package all

import _ "coregate/plugins/limitcount" // limit-count (1002, access)
