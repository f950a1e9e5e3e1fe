package toolsearch

import (
	"slices"
	"strings"
)

// zhGroups is a small Chinese–English lexicon of the words tool APIs use
// (mixed-script queries): a Chinese word, then the English
// words for it. A Chinese query reaches a tool whose name or description
// is English ("发送短信" → sendSms), and an English word reaches a tool
// described in Chinese ("approval" → 审批), both at weightZh, below the
// query's own words. It was written from general knowledge of the two
// languages and of widely used Chinese platforms, not from any query set.
var zhGroups = `
发送 send
消息 message
短信 sms text
邮件 email mail
创建 create
新建 create new
删除 delete remove
更新 update
修改 update edit modify
查询 query search lookup
搜索 search
查找 find search
获取 get fetch
列出 list
列表 list
文件 file
文档 document doc
云文档 document doc
文件夹 folder
目录 directory folder
用户 user
群聊 group chat
聊天 chat
日历 calendar
日程 event schedule calendar
会议 meeting
会议室 room meeting
审批 approval approve
天气 weather
预报 forecast
地图 map
地址 address
地理编码 geocode
逆地理编码 reverse geocode
坐标 coordinates coordinate
经纬度 latitude longitude coordinates
路线 route directions
路径 route path
驾车 driving drive car
步行 walking walk
公交 transit bus
骑行 cycling bicycle
距离 distance
周边 nearby around
附近 nearby around
酒店 hotel
餐厅 restaurant
定位 location locate
位置 location position
视频 video
评论 comment comments
字幕 subtitle subtitles
弹幕 danmaku comment
简介 description summary
上传 upload
下载 download
图片 image picture
照片 photo
翻译 translate translation
支付 payment pay
付款 payment pay
收款 payment collect receive
退款 refund
转账 transfer
订单 order
账单 bill statement
对账单 statement reconciliation
发票 invoice
余额 balance
交易 transaction
考勤 attendance
通讯录 contacts directory
联系人 contact
员工 employee staff
部门 department
通知 notification notify
工作通知 notification
机器人 bot robot
知识库 knowledge wiki
仓库 repository repo
代码 code
分支 branch
提交 commit submit
任务 task
项目 project
表格 table spreadsheet sheet
数据库 database
日志 log logs
监控 monitor monitoring
告警 alert
报警 alert alarm
服务器 server
容器 container
部署 deploy deployment
重启 restart
密码 password
密钥 secret key
登录 login
二维码 qrcode qr
链接 link url
网页 webpage page
浏览器 browser
截图 screenshot
分享 share
权限 permission
标签 tag label
回复 reply
点赞 like
关注 follow subscribe
粉丝 follower followers
热门 popular trending
排行 ranking
直播 live stream
音乐 music
音频 audio
歌曲 song
新闻 news
股票 stock
汇率 exchange currency
快递 express delivery
物流 logistics shipping tracking
商品 product item
库存 inventory stock
价格 price
优惠券 coupon
客户 customer
工单 ticket
日期 date
时间 time
提醒 reminder remind
待办 todo task
笔记 note
统计 statistics stats
分析 analysis analyze
报告 report
导出 export
导入 import
转换 convert
压缩 compress
合并 merge
拆分 split
识别 recognize ocr
扫描 scan
签名 signature sign
加密 encrypt
行程 itinerary trip
航班 flight
火车 train
预订 book reservation
取消 cancel
状态 status
详情 details detail
成员 member members
团队 team
空间 space workspace
页面 page
钉钉 dingtalk
飞书 feishu lark
高德 amap gaode
支付宝 alipay
微信 wechat weixin
语雀 yuque
哔哩哔哩 bilibili
百度 baidu
淘宝 taobao
抖音 douyin tiktok
微博 weibo
知乎 zhihu
`

// weightZh is the weight of a word the Chinese–English lexicon brings in.
var weightZh = float32(0.5)

// zhToEn maps a Chinese word of zhGroups to its stemmed English words;
// enToZh maps a stemmed English word to the index terms of its Chinese
// words (their bigrams, or the character of a one-character word).
var zhToEn, enToZh = func() (map[string][]string, map[string][]string) {
	z, e := map[string][]string{}, map[string][]string{}
	for line := range strings.SplitSeq(zhGroups, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		zh := f[0]
		var zt []string
		for _, t := range Terms(zh) {
			if !isUnigram(t) || len([]rune(zh)) == 1 {
				zt = append(zt, t)
			}
		}
		for _, w := range f[1:] {
			s := stem(w)
			if !slices.Contains(z[zh], s) {
				z[zh] = append(z[zh], s)
			}
			for _, t := range zt {
				if !slices.Contains(e[s], t) {
					e[s] = append(e[s], t)
				}
			}
		}
	}
	return z, e
}()

// zhWords are the Chinese words of zhGroups, longest first, then in text
// order, so that a query scan is deterministic.
var zhWords = func() []string {
	ws := make([]string, 0, len(zhToEn))
	for w := range zhToEn {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return ws
}()
